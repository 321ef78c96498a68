#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){unsigned long long s=0;int N=20000000;double a=now();for(int i=0;i<N;i++)s+=__rdtsc();double b=now();
struct timespec t;for(int i=0;i<N;i++){clock_gettime(CLOCK_REALTIME_COARSE,&t);s+=t.tv_nsec;}double c=now();
for(int i=0;i<N;i++){clock_gettime(CLOCK_REALTIME,&t);s+=t.tv_nsec;}double d=now();
clock_getres(CLOCK_REALTIME_COARSE,&t);
printf("rdtsc %.1f ns, coarse %.1f ns, realtime %.1f ns, coarse res %ld ns (%llu)\n",(b-a)/N,(c-b)/N,(d-c)/N,t.tv_nsec,s&1);}
