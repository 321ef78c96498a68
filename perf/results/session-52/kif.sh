#!/bin/bash
K=${KBIN:-/work/exp/kring-new2}; BS=127.0.0.1:9092
bcpu() { for p in $(pgrep -f kafka.Kafka); do awk '{print $14+$15}' /proc/$p/stat; done | paste -sd+ | bc; }
for r in $(seq $1); do for mif in $2; do
  t=kif-$mif-$r-$RANDOM; $K topics create -b $BS $t -p 256 -r 3 >/dev/null; sleep 12
  b0=$(bcpu)
  if [ $mif = franz ]; then out=$(taskset -c 1 /work/main/perf/target/bin/franz-go-perf produce --bootstrap $BS --topic $t --records 1000000 --key-size 16 --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 2>&1 | grep -oE '"elapsed_s":[0-9.]+')
  else out=$(taskset -c 1 $K perf produce --bootstrap $BS --topic $t --records 1000000 --key-size 16 --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 -X max.in.flight.requests.per.connection=$mif 2>&1 | grep -oE '"elapsed_s":[0-9.]+'); fi
  b1=$(bcpu)
  echo "$mif $out broker_cs $((b1-b0)) $(cd /work/main && python3 /work/exp/batches.py $t | cut -d' ' -f2-9)"
  $K topics delete -b $BS $t >/dev/null 2>&1; sleep 5
done; done
