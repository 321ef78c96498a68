#!/bin/bash
# fw4.sh ROUNDS CLIENT... : produce-keyed-many's shape (1,000,000 records of 200 B, 16-byte keys,
# acks=all, idempotent, lz4, linger 5 ms) into a 256-partition RF-3 topic created just before
# (fresh), then again into it (warm), three nodes; wall (the client's own elapsed_s and
# /usr/bin/time) and task clock by perf stat. CLIENT is a kring binary path or "librdkafka".
R=$1; shift; BS=127.0.0.1:9092; A=${KRING_TOOL:-/work/exp/s55/kring-head}
for r in $(seq $R); do for K in "$@"; do
  t=fw4-$r-$RANDOM; $A topics create -b $BS $t -p 256 -r 3 >/dev/null
  if [ "$K" = librdkafka ]; then cmd=(/work/main/perf/target/release/rdkafka-perf); label=librdkafka; else cmd=($K perf); label=$(basename $K); fi
  for kind in fresh warm; do
    s=$(date +%s.%N)
    out=$(perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -o /tmp/fw4.stat taskset -c 1 "${cmd[@]}" produce --bootstrap $BS --topic $t --records 1000000 --key-size 16 --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 1000000 2>&1 | grep -oE '"elapsed_s":[0-9.]+' | cut -d: -f2)
    e=$(date +%s.%N)
    echo "$label $r $kind elapsed=$out wall=$(echo "$e - $s" | bc) $(awk -F, '/^[0-9]/{printf "%s=%s ", $3, $1}' /tmp/fw4.stat | sed 's/raw_syscalls:sys_enter/sys/')"
  done
  $A topics delete -b $BS $t >/dev/null 2>&1; sleep 3
done; done
