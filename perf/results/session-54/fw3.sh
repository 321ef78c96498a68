#!/bin/bash
# fw3.sh ROUNDS BINS... : produce-keyed-many's shape (1,000,000 records of 200 B, 16-byte keys,
# acks=all, idempotent, lz4, linger 5 ms) into a 256-partition RF-3 topic created just before
# (fresh), then again into it (warm), three nodes; task clock by perf stat.
# BINS are paths to kring binaries; run from the repository root; BASE makes and deletes the topics.
R=$1; shift; BS=127.0.0.1:9092; A=${BASE:-target/release/kring}
for r in $(seq $R); do for K in "$@"; do
  t=fw3-$r-$RANDOM; $A topics create -b $BS $t -p 256 -r 3 >/dev/null
  for kind in fresh warm; do
    out=$(perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -o /tmp/fw3.stat taskset -c 1 $K perf produce --bootstrap $BS --topic $t --records 1000000 --key-size 16 --payload-file perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 1000000 2>&1 | grep -oE '"elapsed_s":[0-9.]+' | cut -d: -f2)
    echo "$K $r $kind $out $(awk -F, '/^[0-9]/{printf "%s=%s ", $3, $1}' /tmp/fw3.stat | sed 's/raw_syscalls:sys_enter/sys/')"
  done
  $A topics delete -b $BS $t >/dev/null 2>&1; sleep 3
done; done
