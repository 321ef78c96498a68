#!/bin/bash
# kmw.sh ROUNDS TOPIC: produce-keyed-many's shape (1M x 200 B, 16-B keys, acks=all, idempotent,
# lz4, linger 5, batch 65536) into an existing warm 256-partition RF-3 topic, three nodes;
# io_uring and epoll alternating (which goes first alternates too), client pinned to CPU 1,
# under perf stat (task clock, context switches, system calls). KRING_TOOL picks the binary.
R=$1; T=$2; BS=127.0.0.1:9092; A=${KRING_TOOL:-/work/main/target/release/kring}
one() {
  local b=$1
  perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -o /tmp/kmw-stat.$$ \
    taskset -c 1 $A perf produce --bootstrap $BS --topic $T --records 1000000 --key-size 16 \
    --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true \
    --compression lz4 --linger-ms 5 --batch-size 65536 --property kring.io.backend=$b > /tmp/kmw-out.$$ 2>&1
  el=$(grep -oE '"elapsed_s":[0-9.]+' /tmp/kmw-out.$$ | cut -d: -f2)
  tc=$(awk -F, '/task-clock/ {printf "%.0f", $1}' /tmp/kmw-stat.$$)
  cs=$(awk -F, '/context-switches/ {print $1}' /tmp/kmw-stat.$$)
  sc=$(awk -F, '/raw_syscalls/ {print $1}' /tmp/kmw-stat.$$)
  echo "$b round=$r elapsed_s=$el task_ms=$tc ctxsw=$cs syscalls=$sc"
}
for r in $(seq $R); do
  if [ $((r % 2)) = 1 ]; then one io_uring; one epoll; else one epoll; one io_uring; fi
done
