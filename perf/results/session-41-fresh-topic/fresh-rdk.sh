#!/usr/bin/env bash
# fresh-rdk.sh ROUNDS KRING : kring perf produce and librdkafka 2.10 (perf/rdkafka-perf), the
# peer contract's arguments: 300,000 records of 90 B with 10-byte keys, acks=all, idempotent,
# linger 5 ms, batch 16 KiB, into a 256-partition topic (RF 1) created just before, then warm.
set -euo pipefail
rounds=$1; kring=$2; base=${3:-}
rdk=perf/target/release/rdkafka-perf
payload=${TMPDIR:-/tmp}/payload-90.txt
[[ -f $payload ]] || python3 -c "print('\n'.join('%090d' % i for i in range(1000)))" > $payload
for ((r=1;r<=rounds;r++)); do
  for client in kring ${base:+kring-base} librdkafka; do
    t="frdk-$r-$RANDOM"
    target/release/kring topics create "$t" -p 256 -r 1 >/dev/null
    for phase in fresh warm; do
      args=(produce --bootstrap 127.0.0.1:9092 --topic $t --records 300000 --payload-file $payload --acks all --idempotence true --compression none --linger-ms 5 --batch-size 16384 --key-size 10)
      if [[ $client == kring ]]; then cmd=($kring perf "${args[@]}"); elif [[ $client == kring-base ]]; then cmd=($base perf "${args[@]}"); else cmd=($rdk "${args[@]}"); fi
      s=$(date +%s.%N)
      out=$(perf stat -x, -e task-clock -o ${TMPDIR:-/tmp}/frdk.stat "${cmd[@]}" 2>/dev/null | grep '^{')
      e=$(date +%s.%N)
      el=$(echo "$out" | python3 -c "import json,sys; print('%.2f' % json.loads(sys.stdin.read())['elapsed_s'])")
      printf "%-10s %-5s process_wall %.2f elapsed_from_first_send %s cpu_ms %.0f\n" $client $phase $(echo "$e - $s" | bc) $el $(grep task-clock ${TMPDIR:-/tmp}/frdk.stat | cut -d, -f1)
    done
    target/release/kring topics delete "$t" >/dev/null
  done
done
