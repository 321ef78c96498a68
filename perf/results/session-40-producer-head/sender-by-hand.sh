#!/bin/bash
# usage: ab3.sh runs bin1 bin2 ... ; sender-thread ns/record and process CPU per run (produce-100 shape)
RUNS=$1; shift
for r in $(seq 1 $RUNS); do
  for b in "$@"; do
    out=$(taskset -c 1 $b perf produce -b 127.0.0.1:9092 -t prof100 -n 1000000 -s 100 --acks 1 --idempotence false --compression none 2>/dev/null)
    s=$(echo "$out" | grep "sender CPU" | grep -o "([0-9.]* ns" | tr -d '( ns')
    c=$(echo "$out" | grep "  CPU " | awk '{print $2}')
    echo "$(basename $b) $s $c"
  done
done
