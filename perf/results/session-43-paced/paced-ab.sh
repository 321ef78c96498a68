#!/bin/bash
# paced-ab.sh ROUNDS BIN... : perf produce --rate 20000 (200,000 records of 500 B, acks=all,
# idempotent, linger 5 ms) into topic lat1 (12 partitions, RF 3, three nodes), the builds
# alternating round by round, client pinned to CPU 1; prints task clock, context switches,
# the run's CPU-s per million and latency percentiles.
rounds=$1; shift
cd /work/main
for r in $(seq 1 $rounds); do
  for bin in "$@"; do
    out=$(taskset -c 1 perf stat -x, -e task-clock,context-switches -- $bin perf produce --bootstrap 127.0.0.1:9092 --topic lat1 --records 200000 --rate 20000 --payload-file perf/target/payloads-500.txt --acks all --idempotence true --compression none --linger-ms 5 --batch-size 1000000 2>&1)
    tc=$(echo "$out" | grep task-clock | cut -d, -f1)
    cs=$(echo "$out" | grep context-switches | cut -d, -f1)
    lat=$(echo "$out" | grep "^  latency" | sed 's/  latency *//')
    printf "round %d %-40s task-clock %8.1f ms  cs %6d  %s\n" $r $(basename $bin) $tc $cs "$lat"
  done
done
