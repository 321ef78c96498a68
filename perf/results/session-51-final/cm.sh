#!/bin/bash
# Alternates kring perf consume of topic cm on io_uring and epoll; prints rec/s, CPU, RSS.
K=${K:-/work/main/target/release/kring}
for r in $(seq 1 ${1:-4}); do
  for be in io_uring epoll; do
    out=$( { /usr/bin/time -f "TIME %U %S %M" taskset -c 1 $K perf consume --topic cm --records 1000000 -X kring.io.backend=$be $EXTRA 2>&1; } 2>&1)
    el=$(echo "$out" | grep -o '"elapsed_s":[0-9.]*' | cut -d: -f2)
    t=$(echo "$out" | grep "^TIME")
    echo "$r $be elapsed=$el $t"
  done
done
