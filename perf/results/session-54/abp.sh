#!/bin/bash
# abp.sh ROUNDS BIN_A BIN_B : produce-100's shape on one node (topic p100: 3 partitions), the two builds
# alternating, each under perf stat (task clock, context switches, system calls); run from the repository root.
for i in $(seq $1); do for bin in $2 $3; do
  out=$(perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -o /tmp/abp.stat taskset -c 1 $bin perf produce --bootstrap 127.0.0.1:9092 --topic p100 --records 1000000 --payload-file perf/target/payloads-100.txt --acks 1 --idempotence false --compression none 2>&1 | grep -oE '"elapsed_s":[0-9.]+' | cut -d: -f2)
  echo "$(basename $bin) $(awk -F, '/^[0-9]/{printf "%s ", $1}' /tmp/abp.stat) $out"
done; done
