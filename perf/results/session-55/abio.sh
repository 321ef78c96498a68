#!/bin/bash
# abio.sh ROUNDS BIN : produce-100's shape on one node (topic p100: 3 partitions), the io_uring and
# epoll backends of one build alternating, each under perf stat; run from the repository root.
for i in $(seq $1); do for be in io_uring epoll; do
  out=$(perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -o /tmp/abio.stat taskset -c 1 $2 perf produce --bootstrap 127.0.0.1:9092 --topic p100 --records 1000000 --payload-file perf/target/payloads-100.txt --acks 1 --idempotence false --compression none --property kring.io.backend=$be 2>&1 | grep -oE '"elapsed_s":[0-9.]+' | cut -d: -f2)
  echo "$be $(awk -F, '/^[0-9]/{printf "%s ", $1}' /tmp/abio.stat) $out"
done; done
