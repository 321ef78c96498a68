#!/bin/bash
# hk.sh: one pkx-shaped run of kring-hack, with KRING_HACK_DROP set when $1 = drop
T=p100-$RANDOM$RANDOM
/work/main/target/release/kring topics create $T -p 3 -r 1 >/dev/null 2>&1; sleep 0.3
if [ "$1" = drop ]; then export KRING_HACK_DROP=1; fi
taskset -c 1 perf stat -x, -e task-clock,context-switches -o /tmp/hk.$$ /work/exp/kring-hack perf produce --bootstrap 127.0.0.1:9092 --topic $T --records 1000000 --payload-file /work/main/perf/target/payloads-100.txt --acks 1 --idempotence false --compression none --linger-ms 5 --batch-size 1000000 > /tmp/hko.$$ 2>&1
snd=$(grep "sender CPU" /tmp/hko.$$ | sed 's/.*(\([0-9.]*\) ns.*/\1/')
echo "$1 snd $snd task $(grep task-clock /tmp/hk.$$ | cut -d, -f1) cs $(grep context /tmp/hk.$$ | cut -d, -f1)"
/work/main/target/release/kring topics delete $T >/dev/null 2>&1; rm -f /tmp/hk.$$ /tmp/hko.$$
