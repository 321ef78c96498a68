#!/bin/bash
# km.sh ROUNDS CLIENT...: produce-keyed-many (perf/run's shape: 1M x 200 B, 16-B keys, acks=all,
# idempotent, lz4, linger 5, batch 65536) into a fresh 256-partition RF-3 topic (ready + 3 s settle),
# three nodes; client pinned to CPU 1. Prints elapsed, client CPU, brokers' CPU (all three JVMs).
R=$1; shift; BS=127.0.0.1:9092; A=${KRING_TOOL:-/work/main/target/release/kring}
bcpu() { local s=0; for p in $(cat /work/main/target/kafka/node*/kafka.pid); do set -- $(awk '{print $14, $15}' /proc/$p/stat); s=$((s+$1+$2)); done; echo $s; }
for r in $(seq $R); do for K in "$@"; do
  t=km-$r-$RANDOM; $A topics create -b $BS $t -p 256 -r 3 >/dev/null
  until $A topics describe -b $BS $t --json 2>/dev/null | python3 -c 'import json,sys; p=json.load(sys.stdin)["partitions"]; sys.exit(0 if len(p)==256 and all(x.get("leader",-1)>=0 and len(x.get("isr",[]))==3 for x in p) else 1)'; do sleep 0.2; done; sleep 3
  case $K in franz) cmd=(/work/main/perf/target/bin/franz-go-perf);; librdkafka) cmd=(/work/main/perf/target/release/rdkafka-perf);; *) cmd=($K perf);; esac
  b0=$(bcpu)
  out=$( { /usr/bin/time -f "cpu=%U+%S rss=%M" taskset -c 1 "${cmd[@]}" produce --bootstrap $BS --topic $t --records 1000000 --key-size 16 --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 ; } 2>&1 | grep -oE '"elapsed_s":[0-9.]+|cpu=[0-9.+]+' | tr '\n' ' ')
  b1=$(bcpu)
  echo "$(basename $K) $r $out brokers_cpu_s=$(echo "($b1-$b0)/100" | bc -l | cut -c1-5)"
  $A topics delete -b $BS $t >/dev/null 2>&1; sleep 3
done; done
