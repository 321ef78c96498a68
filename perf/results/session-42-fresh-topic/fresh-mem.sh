#!/usr/bin/env bash
# fresh-mem.sh ROUNDS BIN [produce args...]: a fresh 256-partition topic (RF 1), then the
# same topic warm: 300,000 keyed records (as fresh-ab.sh), task-clock CPU ms and page faults.
rounds=$1; bin=$2; shift 2
for ((r=1;r<=rounds;r++)); do
  t="fm-$r-$RANDOM"
  /work/main/target/release/kring topics create "$t" -p 256 -r 1 >/dev/null
  line="round $r"
  for phase in fresh warm; do
    perf stat -x, -e task-clock,page-faults -o /tmp/fm.stat $bin produce -t "$t" -K : -a all --idempotence true -X linger.ms=5 "$@" -f /tmp/fresh-input.txt >/dev/null 2>&1
    line="$line  $phase cpu $(grep task-clock /tmp/fm.stat | cut -d, -f1 | cut -d. -f1) pf $(grep page-faults /tmp/fm.stat | cut -d, -f1)"
  done
  echo "$line"
  /work/main/target/release/kring topics delete "$t" >/dev/null
done
