#!/bin/bash
# usage: [PAYLOAD="--payload-file F"] [N=records] pkx.sh BIN [kring perf produce extra args...]: one produce-100-shaped run under perf stat, one summary line
BIN=$1; shift
T=p100-$RANDOM$RANDOM
/work/main/target/release/kring topics create $T -p 3 -r 1 >/dev/null 2>&1
sleep 0.3
taskset -c 1 perf stat -x, -e task-clock,page-faults,user_time,system_time,context-switches -o /tmp/pstat.$$ $BIN perf produce --bootstrap 127.0.0.1:9092 --topic $T --records ${N:-1000000} ${PAYLOAD:---payload-file /work/main/perf/target/payloads-100.txt} --acks 1 --idempotence false --compression none --linger-ms 5 --batch-size 1000000 "$@" > /tmp/out.$$ 2>&1
rps=$(grep throughput /tmp/out.$$ | awk '{print $2}'); snd=$(grep "sender CPU" /tmp/out.$$ | sed 's/.*(\([0-9.]*\) ns.*/\1/')
tc=$(grep task-clock /tmp/pstat.$$ | cut -d, -f1); pf=$(grep page-faults /tmp/pstat.$$ | cut -d, -f1)
ut=$(grep user_time /tmp/pstat.$$ | cut -d, -f1); st=$(grep system_time /tmp/pstat.$$ | cut -d, -f1); cs=$(grep context-sw /tmp/pstat.$$ | cut -d, -f1)
printf "%-22s snd %6s rps %8s task %7.1f ms user %6.1f sys %6.1f faults %6s cs %5s\n" "$(basename $BIN)" "$snd" "$rps" "$tc" $(echo "$ut/1000000" | bc -l) $(echo "$st/1000000" | bc -l) "$pf" "$cs"
/work/main/target/release/kring topics delete $T >/dev/null 2>&1
rm -f /tmp/pstat.$$ /tmp/out.$$
