#!/bin/bash
# pst.sh BIN BACKEND: one keyed run, perf stat attached per thread: task clock, context switches, page faults, system calls
B=$2; taskset -c 1 $1 perf produce --bootstrap 127.0.0.1:9092 --topic kmw --records 1000000 --key-size 16 \
    --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 \
    --linger-ms 5 --batch-size 65536 --property kring.io.backend=$B >/dev/null 2>&1 &
P=$!; sleep 0.05
perf stat --per-thread -x, -e task-clock,context-switches,page-faults,raw_syscalls:sys_enter -p $P -o /tmp/pst.out 2>/dev/null
wait $P
echo "== $B"; grep -v "^#" /tmp/pst.out | grep -v "^$" | awk -F, '{split($1,a,"-"); printf "%s %s=%s\n", $1, $4, $2}' | sort | awk '{t[$1]=t[$1]" "$2} END {for (k in t) print k, t[k]}'
