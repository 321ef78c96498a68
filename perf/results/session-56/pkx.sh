#!/bin/bash
# pkx.sh LABEL BIN [extra perf-produce args...]: pk1 with extra args
L=$1; BIN=$2; shift 2
T=p100-$RANDOM$RANDOM
${KRING_TOOL:-/work/main/target/release/kring} topics create $T -p 3 -r 1 >/dev/null 2>&1; sleep 0.3
taskset -c 1 perf stat -x, -e task-clock,page-faults,user_time,system_time -o /tmp/pst.$$ $BIN perf produce --bootstrap 127.0.0.1:9092 --topic $T --records ${N:-1000000} --payload-file /work/main/perf/target/payloads-100.txt --acks 1 --idempotence false --compression none --linger-ms 5 --batch-size 1000000 "$@" > /tmp/po.$$ 2>&1
${KRING_TOOL:-/work/main/target/release/kring} topics delete $T >/dev/null 2>&1
tc=$(grep task-clock /tmp/pst.$$ | cut -d, -f1); pf=$(grep page-faults /tmp/pst.$$ | cut -d, -f1)
ut=$(grep user_time /tmp/pst.$$ | cut -d, -f1); st=$(grep system_time /tmp/pst.$$ | cut -d, -f1)
snd=$(grep "sender CPU" /tmp/po.$$ | sed 's/.*(\([0-9.]*\) ns.*/\1/')
el=$(tail -1 /tmp/po.$$ | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["elapsed_s"])' 2>/dev/null)
printf "%-10s task %7.1f user %6.1f sys %6.1f faults %6s snd %s el %s\n" $L $tc $(echo "$ut/1000000"|bc -l) $(echo "$st/1000000"|bc -l) $pf "$snd" "$el"
rm -f /tmp/pst.$$ /tmp/po.$$
