#!/bin/bash
# fw.sh ROUNDS BIN PARTITIONS : produce-100's shape into a topic created just before (fresh), then again into it (warm)
K=$2; BS=127.0.0.1:9092
for r in $(seq $1); do
  t=fw-$r-$RANDOM; $K topics create -b $BS $t -p $3 -r 1 >/dev/null
  for kind in fresh warm; do
    out=$(perf stat -x, -e task-clock,page-faults,context-switches -o /tmp/fw.stat taskset -c 1 $K perf produce --bootstrap $BS --topic $t --records 1000000 --payload-file /work/main/perf/target/payloads-100.txt --acks 1 --idempotence false --compression none 2>&1 | grep -oE '"elapsed_s":[0-9.]+' | cut -d: -f2)
    echo "$r $kind $out $(awk -F, '/^[0-9]/{printf "%s=%s ", $3, $1}' /tmp/fw.stat)"
  done
  $K topics delete -b $BS $t >/dev/null 2>&1
done
