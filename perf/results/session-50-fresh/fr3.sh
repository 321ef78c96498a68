#!/bin/bash
# fr3.sh ROUNDS BIN... : a fresh 256-partition topic per client and round; when the broker
# had created the last partition's log (its server.log) against the client's launch and
# end: "ready" = last log created - launch; "after" = process end - last log created.
rounds=$1; shift
K=/work/main/target/release/kring
L=/work/main/target/kafka/node1/logs/server.log
for ((r=1;r<=rounds;r++)); do
  for bin in "$@"; do
    t="fr3-$r-$RANDOM"
    $K topics create "$t" -p 256 -r 1 >/dev/null
    t0=$(date +%s.%N)
    taskset -c 1 perf stat -x, -e task-clock -o /tmp/fr3.stat $bin $( [[ $bin == *rdkafka-perf ]] || echo perf ) produce --bootstrap 127.0.0.1:9092 --topic $t --records 300000 --payload-file /work/main/perf/target/payloads-100.txt --key-size 16 --acks all --idempotence true --compression none --linger-ms 5 --batch-size ${BATCH:-1000000} ${EXTRA} > /tmp/fr3.out 2>&1 < /dev/null
    t1=$(date +%s.%N)
    sleep 0.5
    last=$(grep "Created log for partition $t-" $L | tail -1 | cut -c2-24 | sed 's/,/./')
    first=$(grep -m1 "Created log for partition $t-" $L | cut -c2-24 | sed 's/,/./')
    lr=$(date -d "$last" +%s.%N); fr=$(date -d "$first" +%s.%N)
    el=$(grep -o '"elapsed_s":[0-9.]*' /tmp/fr3.out | cut -d: -f2)
    printf "%-14s ${TAG} round %d  create->launch %5.2f  launch->ready %5.2f  ready->end %5.2f  el %5.2f  cpu_ms %4.0f\n" $(basename $bin) $r $(echo "$t0-$fr"|bc) $(echo "$lr-$t0"|bc) $(echo "$t1-$lr"|bc) ${el:-0} $(grep task-clock /tmp/fr3.stat | cut -d, -f1)
    $K topics delete "$t" >/dev/null
    sleep 2
  done
done
