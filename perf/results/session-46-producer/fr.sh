#!/bin/bash
# fr.sh ROUNDS BIN... : per round and build, a fresh 256-partition topic (RF 1) written by
# `kring perf produce` (300,000 records of 100 B, 16-byte keys, acks=all, idempotent,
# linger 5 ms, batch 1 MB), then written again warm; whole-process CPU and context switches.
rounds=$1; shift
K=/work/main/target/release/kring
for ((r=1;r<=rounds;r++)); do
  for bin in "$@"; do
    t="fr-$r-$RANDOM"
    $K topics create "$t" -p 256 -r 1 >/dev/null
    line="$(printf %-12s $(basename $bin)) round $r"
    for phase in fresh warm; do
      perf stat -x, -e task-clock,context-switches -o /tmp/fr.stat $bin perf produce --topic $t --records 300000 --payload-file /work/main/perf/target/payloads-100.txt --key-size 16 --acks all --idempotence true --compression none --linger-ms 5 --batch-size ${BATCH:-1000000} ${EXTRA} > /tmp/fr.out 2>&1
      el=$(grep -o '"elapsed_s":[0-9.]*' /tmp/fr.out | cut -d: -f2)
      snd=$(grep 'sender CPU' /tmp/fr.out | awk '{print $3}')
      line="$line  $phase el $(printf %.2f $el) cpu_ms $(printf %.0f $(grep task-clock /tmp/fr.stat | cut -d, -f1)) snd_ms $(echo "$snd*1000" | bc | cut -d. -f1) cs $(grep context /tmp/fr.stat | cut -d, -f1)"
    done
    echo "$line"
    $K topics delete "$t" >/dev/null
  done
done
