#!/bin/bash
# pk1.sh LABEL BIN [env...]: one produce-100 run; task clock, faults, sender ns
L=$1; BIN=$2; shift 2
T=p100-$RANDOM$RANDOM
/work/exp/s55/kring-head topics create $T -p 3 -r 1 >/dev/null 2>&1; sleep 0.3
env "$@" taskset -c 1 perf stat -x, -e task-clock,page-faults,user_time,system_time -o /tmp/pst.$$ $BIN perf produce --bootstrap 127.0.0.1:9092 --topic $T --records ${N:-1000000} --payload-file /work/main/perf/target/payloads-100.txt --acks 1 --idempotence false --compression none --linger-ms 5 --batch-size 1000000 > /tmp/po.$$ 2>&1
/work/exp/s55/kring-head topics delete $T >/dev/null 2>&1
tc=$(grep task-clock /tmp/pst.$$ | cut -d, -f1); pf=$(grep page-faults /tmp/pst.$$ | cut -d, -f1)
ut=$(grep user_time /tmp/pst.$$ | cut -d, -f1); st=$(grep system_time /tmp/pst.$$ | cut -d, -f1)
snd=$(grep "sender CPU" /tmp/po.$$ | sed 's/.*(\([0-9.]*\) ns.*/\1/')
printf "%-10s task %7.1f user %6.1f sys %6.1f faults %6s snd %s\n" $L $tc $(echo "$ut/1000000"|bc -l) $(echo "$st/1000000"|bc -l) $pf $snd
rm -f /tmp/pst.$$ /tmp/po.$$
