#!/usr/bin/env bash
# fresh-ab.sh ROUNDS BIN... : fresh then warm 256-partition topic (RF 1), 300,000 keyed
# records (kring produce, as perf/fresh-topic), builds alternating; CPU ms from perf stat.
set -euo pipefail
rounds=$1; shift
input=${TMPDIR:-/tmp}/fresh-input.txt
[[ -f $input ]] || python3 -c "
with open('$input', 'w') as f:
    for i in range(300000):
        f.write('key%07d:%s\n' % (i, 'v' * 90))
"
for ((r=1;r<=rounds;r++)); do
  for bin in "$@"; do
    t="fab-$r-$RANDOM"
    target/release/kring topics create "$t" -p 256 -r 1 >/dev/null
    line="$(basename $bin) round $r"
    for phase in fresh warm; do
      s=$(date +%s.%N)
      perf stat -x, -e task-clock -o ${TMPDIR:-/tmp}/fab.stat $bin produce -t "$t" -K : -a all --idempotence true -X linger.ms=5 -f "$input" >/dev/null
      e=$(date +%s.%N)
      cpu=$(grep task-clock ${TMPDIR:-/tmp}/fab.stat | cut -d, -f1)
      line="$line  $phase wall $(printf %.2f $(echo "$e - $s" | bc)) cpu_ms $(printf %.0f $cpu)"
    done
    echo "$line"
    target/release/kring topics delete "$t" >/dev/null
  done
done
