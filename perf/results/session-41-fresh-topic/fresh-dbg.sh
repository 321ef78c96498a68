#!/usr/bin/env bash
# fresh-stats.sh ROUNDS BIN... : fresh topic, kring perf produce --stats: CPU, wall, requests, retries
rounds=$1; shift
for ((r=1;r<=rounds;r++)); do
  for bin in "$@"; do
    t="fst-$r-$RANDOM"
    target/release/kring topics create "$t" -p 256 -r 1 >/dev/null
    for phase in fresh warm; do
      out=$(KRING_DBG=1 perf stat -x, -e task-clock -o ${TMPDIR:-/tmp}/fst.stat $bin perf produce -t $t -n 300000 -s 90 --key-size 10 --acks all --idempotence true --linger-ms 5 --batch-size 16384 --stats 2>&1)
      req=$(echo "$out" | grep 'requests_total{.*api="Produce"}' | awk '{s+=$2} END {print s}')
      retr=$(echo "$out" | grep 'producer_retries_total' | awk '{s+=$2} END {print s}')
      el=$(echo "$out" | grep '  elapsed' | awk '{print $2}')
      dr=$(echo "$out" | grep "^sink" | awk "{d+=\$10; w+=\$6; ms+=\$12} END {print d, w, ms}"); printf "%-16s %-5s cpu_ms %4.0f elapsed %s produce_requests %s retries %s drains/wakes/drain_ms %s\n" $(basename $bin) $phase $(grep task-clock ${TMPDIR:-/tmp}/fst.stat | cut -d, -f1) $el $req ${retr:-0} "$dr"
    done
    target/release/kring topics delete "$t" >/dev/null
  done
done
