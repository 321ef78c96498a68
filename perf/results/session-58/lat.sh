#!/bin/bash
# lat.sh BIN BACKEND [RECORDS]: the latency workload's producer alone (20,000 records/s of
# 500 B, acks=all, idempotent, linger 5 ms) into the existing 12-partition RF-3 topic lat12
# on three nodes, client pinned to CPU 1; perf stat attached per thread once it starts.
B=$2; N=${3:-200000}
taskset -c 1 $1 perf produce --bootstrap 127.0.0.1:9092 --topic lat12 --records $N --rate 20000 \
  --payload-file /work/main/perf/target/payloads-500.txt --acks all --idempotence true --compression none \
  --linger-ms 5 --batch-size 1000000 --property kring.io.backend=$B --stats > /tmp/lat.out 2>&1 &
P=$!; sleep 0.05
perf stat --per-thread -x, -e task-clock,context-switches,raw_syscalls:sys_enter -p $P -o /tmp/lat.stat 2>/dev/null
wait $P
req=$(grep 'kring_broker_requests_total' /tmp/lat.out | grep Produce | awk '{s+=$2}END{print s}')
echo "== $B requests=$req $(grep -oE '"p99_ms":[0-9.]+' /tmp/lat.out) $(awk '/^  CPU /{print "cpu="$2}' /tmp/lat.out)"
grep -v "^#" /tmp/lat.stat | grep -v "^$" | awk -F, '{printf "%s %s=%s\n", $1, $4, $2}' | sort | awk '{t[$1]=t[$1]" "$2} END {for (k in t) print k, t[k]}' | sort
