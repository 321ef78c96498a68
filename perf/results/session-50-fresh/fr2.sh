#!/bin/bash
# fr2.sh ROUNDS BIN... : fr.sh for any client speaking `perf produce` (kring, rdkafka-perf):
# per round and client, a fresh 256-partition topic (RF 1) written with 300,000 keyed
# 100-B records (acks=all, idempotent, linger 5 ms, batch 1 MB), then written again warm;
# whole-process CPU (task clock), wall (the client's elapsed), context switches, faults.
rounds=$1; shift
K=/work/main/target/release/kring
for ((r=1;r<=rounds;r++)); do
  for bin in "$@"; do
    t="fr-$r-$RANDOM"
    $K topics create "$t" -p 256 -r 1 >/dev/null
    line="$(printf %-14s $(basename $bin)) round $r"
    for phase in fresh warm; do
      taskset -c 1 perf stat -x, -e task-clock,context-switches,page-faults -o /tmp/fr.stat $bin $( [[ $bin == *rdkafka-perf ]] || echo perf ) produce --bootstrap 127.0.0.1:9092 --topic $t --records 300000 --payload-file /work/main/perf/target/payloads-100.txt --key-size 16 --acks all --idempotence true --compression none --linger-ms 5 --batch-size ${BATCH:-1000000} > /tmp/fr.out 2>&1 < /dev/null
      el=$(grep -o '"elapsed_s":[0-9.]*' /tmp/fr.out | cut -d: -f2)
      line="$line  $phase el $(printf %.2f ${el:-0}) cpu_ms $(printf %.0f $(grep task-clock /tmp/fr.stat | cut -d, -f1)) cs $(grep context /tmp/fr.stat | cut -d, -f1) pf $(grep page-faults /tmp/fr.stat | cut -d, -f1)"
    done
    echo "$line"
    $K topics delete "$t" >/dev/null
  done
done
