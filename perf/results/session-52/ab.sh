#!/bin/bash
# ab.sh ROUNDS MODE(produce|consume) BIN_A BIN_B : task clock ms alternating
R=$1; M=$2; A=$3; B=$4
for i in $(seq $R); do
  for bin in $A $B; do
    if [ $M = produce ]; then
      out=$(taskset -c 1 perf stat -x, -e task-clock $bin perf produce -b 127.0.0.1:9092 -t p100 --acks 1 --idempotence false 2>&1)
    else
      out=$(taskset -c 1 perf stat -x, -e task-clock $bin perf consume -b 127.0.0.1:9092 -t c100 2>&1)
    fi
    tc=$(echo "$out" | grep task-clock | cut -d, -f1)
    rs=$(echo "$out" | grep throughput | awk '{print $2}')
    echo "$(basename $bin) $tc $rs"
  done
done
