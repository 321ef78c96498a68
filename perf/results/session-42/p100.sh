#!/bin/bash
# usage: p100.sh BIN TAG [perf-prefix...]
BIN=$1; TAG=$2; shift 2
T=p100-$TAG-$RANDOM$RANDOM
/work/main/target/release/kring topics create $T --partitions 3 --replication-factor 1 -b 127.0.0.1:9092 >/dev/null 2>&1 || /work/main/target/release/kring topics create $T -p 3 -r 1 >/dev/null
sleep 0.5
taskset -c 1 "$@" $BIN perf produce --bootstrap 127.0.0.1:9092 --topic $T --records 1000000 --payload-file /work/main/perf/target/payloads-100.txt --acks 1 --idempotence false --compression none --linger-ms 5 --batch-size 1000000
