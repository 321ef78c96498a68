#!/bin/bash
# usage: BE=io_uring|epoll ckx.sh BIN TOPIC N [extra]: one consume run under perf stat
BIN=$1; T=$2; N=$3; shift 3
KRING_IO_BACKEND=$BE taskset -c 1 perf stat -x, -e task-clock,page-faults,user_time,system_time,context-switches,raw_syscalls:sys_enter -o /tmp/cstat.$$ $BIN perf consume --bootstrap 127.0.0.1:9092 --topic $T --records $N "$@" > /tmp/cout.$$ 2>&1
rps=$(grep -o '"records_per_s":[0-9.]*\|throughput[^,]*' /tmp/cout.$$ | head -1); el=$(grep -o '"elapsed_s":[0-9.]*' /tmp/cout.$$ | cut -d: -f2)
tc=$(grep task-clock /tmp/cstat.$$ | cut -d, -f1); cs=$(grep context-sw /tmp/cstat.$$ | cut -d, -f1); sc=$(grep raw_sys /tmp/cstat.$$ | cut -d, -f1)
ut=$(grep user_time /tmp/cstat.$$ | cut -d, -f1); st=$(grep system_time /tmp/cstat.$$ | cut -d, -f1)
printf "%-10s %-14s elapsed %8s task %7.1f ms user %6.1f sys %6.1f cs %6s syscalls %6s\n" "$BE" "$(basename $BIN)" "$el" "$tc" $(echo "$ut/1000000" | bc -l) $(echo "$st/1000000" | bc -l) "$cs" "$sc"
rm -f /tmp/cstat.$$ /tmp/cout.$$
