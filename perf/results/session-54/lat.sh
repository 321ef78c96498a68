#!/bin/bash
# lat.sh ROUNDS BINS... : latency workload's producer by hand (topic lat: 12 partitions RF3; 500 B, 20k/s, acks=all, 200k records), perf stat of each
# BINS are paths to kring binaries; run from the repository root.
R=$1; shift
for i in $(seq $R); do for b in "$@"; do
 out=$(taskset -c 1 perf stat -e task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex -x, -o /tmp/ps.$$ $b perf produce --bootstrap 127.0.0.1:9092 --topic lat --records 200000 -s 500 --acks all --idempotence true --compression none --linger-ms 5 --batch-size 1000000 --rate 20000 2>&1 | grep -oE '"p50_ms":[0-9.]+,"p99_ms":[0-9.]+,"p999_ms":[0-9.]+')
 st=$(awk -F, '/^[0-9]/{printf "%s=%s ", $3, $1}' /tmp/ps.$$ | sed 's/syscalls:sys_enter_//g;s/raw_syscalls:sys_enter/sys/')
 echo "$b $out $st"
done; done
