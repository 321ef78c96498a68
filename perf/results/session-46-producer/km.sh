#!/bin/bash
# km.sh ROUNDS BIN...: produce-keyed-many's shape by hand (1M records of 200 B, 16-byte keys,
# 256 partitions RF 3 on three nodes, acks=all, idempotent, lz4, linger 5, batch 64 KiB),
# one topic per round written by each build in turn (warm after the first); client on CPU 1.
rounds=$1; shift
K=/work/main/target/release/kring
for ((r=1;r<=rounds;r++)); do
  t="km-$r-$RANDOM"
  $K topics create "$t" -p 256 -r 3 >/dev/null; sleep 2
  $K perf produce --topic $t --records 100000 --payload-file /work/main/perf/target/payloads-200.txt --key-size 16 --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 >/dev/null 2>&1
  for bin in "$@"; do
    taskset -c 1 perf stat -x, -e task-clock,context-switches -o /tmp/km.stat $bin perf produce --topic $t --records 1000000 --payload-file /work/main/perf/target/payloads-200.txt --key-size 16 --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 > /tmp/km.out 2>&1
    el=$(grep -o '"elapsed_s":[0-9.]*' /tmp/km.out | cut -d: -f2)
    printf "%-14s round %d el %.2f rps %7.0f cpu_ms %4.0f cs %s\n" $(basename $bin) $r $el $(echo "1000000/$el" | bc -l) $(grep task-clock /tmp/km.stat | cut -d, -f1) $(grep context /tmp/km.stat | cut -d, -f1)
  done
  $K topics delete "$t" >/dev/null
done
