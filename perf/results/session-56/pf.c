#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){int mode=atoi(argv[1]);size_t sz=1<<20;int n=32;double a=now();
for(int i=0;i<n;i++){char*p=malloc(sz);
 if(mode==1){ long pg=4096; char*s=(char*)(((unsigned long)p+pg-1)&~(pg-1)); if(madvise(s,(p+sz-s)&~(pg-1),MADV_POPULATE_WRITE))perror("m");}
 if(mode==2){ long pg=4096; char*s=(char*)(((unsigned long)p+pg-1)&~(pg-1)); madvise(s,(p+sz-s)&~(pg-1),MADV_HUGEPAGE);}
 for(size_t j=0;j<sz;j+=4096)p[j]=1; }
printf("mode %d: %.2f ms\n",mode,now()-a);}
