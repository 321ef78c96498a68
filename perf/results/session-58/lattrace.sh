#!/bin/bash
# lattrace.sh BIN BACKEND: the latency workload's producer (lat.sh's shape, 200,000 records); strace -c of the worker thread for 5 s of it.
B=$2
taskset -c 1 $1 perf produce --bootstrap 127.0.0.1:9092 --topic lat12 --records 200000 --rate 20000 \
  --payload-file /work/main/perf/target/payloads-500.txt --acks all --idempotence true --compression none \
  --linger-ms 5 --batch-size 1000000 --property kring.io.backend=$B > /tmp/lt.out 2>&1 &
P=$!; sleep 0.3
W=$(for t in /proc/$P/task/*; do [ "$(cat $t/comm)" = kring-io-0 ] && basename $t; done)
timeout 5 strace -c -p $W -o /tmp/lt.trace >/dev/null 2>&1
wait $P
echo "== $B"; cat /tmp/lt.trace
