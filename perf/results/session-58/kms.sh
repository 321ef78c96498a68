#!/bin/bash
# kms.sh ROUNDS TOPIC: like kmw.sh but with --stats: total and sending-thread CPU, batches,
# Produce requests, per backend (alternating, client pinned to CPU 1).
R=$1; T=$2; A=${KRING_TOOL:-/work/main/target/release/kring}
one() {
  taskset -c 1 $A perf produce --bootstrap 127.0.0.1:9092 --topic $T --records 1000000 --key-size 16 \
    --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 \
    --linger-ms 5 --batch-size 65536 --property kring.io.backend=$1 --stats > /tmp/kms.$$ 2>&1
  cpu=$(awk '/^  CPU /{print $2}' /tmp/kms.$$); snd=$(awk '/sender CPU/{print $3}' /tmp/kms.$$)
  el=$(awk '/^  elapsed/{print $2}' /tmp/kms.$$)
  bat=$(awk '/kring_producer_batches_total/{print $2}' /tmp/kms.$$)
  req=$(grep 'kring_broker_requests_total' /tmp/kms.$$ | grep Produce | awk '{s+=$2}END{print s}')
  echo "$1 round=$r elapsed=$el cpu=$cpu sender=$snd workers=$(echo "$cpu-$snd" | bc) batches=$bat produce_reqs=$req"
}
for r in $(seq $R); do
  if [ $((r % 2)) = 1 ]; then one io_uring; one epoll; else one epoll; one io_uring; fi
done
