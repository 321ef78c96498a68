#!/bin/bash
# fwstat.sh ROUND: fw4.sh's shape (1,000,000 keyed 200-B records, acks=all, idempotent,
# lz4, into a 256-partition RF-3 topic created just before, then again into it) with
# kring's --stats and a cpu-clock profile of each run: fresh-ROUND.{stats,data},
# warm-ROUND.{stats,data}.
R=$1; BS=127.0.0.1:9092; A=${KRING_TOOL:-/work/exp/kring-head}
t=fws-$R-$RANDOM; $A topics create -b $BS $t -p 256 -r 3 >/dev/null
for kind in fresh warm; do
  taskset -c 1 perf record -q -F 4999 -e cpu-clock -g -o $kind-$R.data $A perf produce --bootstrap $BS --topic $t --records 1000000 --key-size 16 --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 1000000 --stats > $kind-$R.stats 2>&1
  echo "$kind $R $(grep -oE '"elapsed_s":[0-9.]+' $kind-$R.stats)"
done
$A topics delete -b $BS $t >/dev/null 2>&1
