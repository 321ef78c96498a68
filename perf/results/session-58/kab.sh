#!/bin/bash
# kab.sh ROUNDS TOPIC BACKEND LABEL=BIN...: produce-keyed-many's shape (1M x 200 B, 16-B keys,
# acks=all, idempotent, lz4, linger 5, batch 65536) into an existing warm 256-partition RF-3
# topic on three nodes, the builds taking turns (the order rotating each round), client pinned
# to CPU 1, under perf stat: total and sending-thread CPU (--stats), context switches,
# batches and Produce requests.
R=$1; T=$2; B=$3; shift 3
one() {
  local label=${1%%=*} bin=${1#*=}
  perf stat -x, -e context-switches -o /tmp/kab-stat.$$ taskset -c 1 $bin perf produce \
    --bootstrap 127.0.0.1:9092 --topic $T --records 1000000 --key-size 16 \
    --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true \
    --compression lz4 --linger-ms 5 --batch-size 65536 --property kring.io.backend=$B --stats > /tmp/kab.$$ 2>&1
  cpu=$(awk '/^  CPU /{print $2}' /tmp/kab.$$); snd=$(awk '/sender CPU/{print $3}' /tmp/kab.$$)
  el=$(awk '/^  elapsed/{print $2}' /tmp/kab.$$)
  bat=$(awk '/kring_producer_batches_total/{print $2}' /tmp/kab.$$)
  req=$(grep 'kring_broker_requests_total' /tmp/kab.$$ | grep Produce | awk '{s+=$2}END{print s}')
  cs=$(awk -F, '/context-switches/ {print $1}' /tmp/kab-stat.$$)
  echo "$label round=$r elapsed=$el cpu=$cpu sender=$snd workers=$(echo "$cpu-$snd" | bc) ctxsw=$cs batches=$bat produce_reqs=$req"
}
for r in $(seq $R); do
  n=$#; k=$(( (r - 1) % n )); set -- "${@:k+1}" "${@:1:k}"
  for x in "$@"; do one "$x"; done
done
