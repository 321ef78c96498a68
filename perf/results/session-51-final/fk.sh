#!/bin/bash
# Fresh vs warm keyed-many produce (1M x 100 B, 16-B keys, 256 partitions RF3, acks=all,
# idempotent, lz4) on the running cluster: per round, a fresh topic then the same topic again.
BIN=${BIN:-/work/main/target/release/kring}; K=/work/main/target/release/kring
P="--records 1000000 --payload-file /work/main/perf/target/payloads-100.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 --key-size 16"
for r in $(seq 1 ${1:-4}); do
  t=fk-$TAG-$r-$RANDOM
  $K topics create $t -p 256 -r 3 >/dev/null 2>&1
  for phase in fresh warm; do
    out=$( { /usr/bin/time -f "TIME %e %U %S" taskset -c 1 $BIN $SUB produce --bootstrap 127.0.0.1:9092 --topic $t $P 2>&1; } 2>&1)
    el=$(echo "$out" | grep -o '"elapsed_s":[0-9.]*' | cut -d: -f2)
    echo "$r $phase elapsed=$el $(echo "$out" | grep ^TIME)"
  done
  $K topics delete $t >/dev/null 2>&1
done
