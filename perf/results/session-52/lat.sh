#!/bin/bash
# lat.sh ROUNDS BINS... : latency workload shape (12 partitions RF3, 500 B, 20k/s, acks=all, 200k records)
R=$1; shift
BS=127.0.0.1:9092; K=/work/exp/kring-new2
$K topics create -b $BS lat -p 12 -r 3 >/dev/null 2>&1; sleep 8
for i in $(seq $R); do for b in "$@"; do
 out=$(taskset -c 1 /work/exp/$b perf produce --bootstrap $BS --topic lat --records 200000 --payload-file /work/main/perf/target/payloads-500.txt --acks all --idempotence true --compression none --linger-ms 5 --batch-size 1000000 --rate 20000 2>&1 | grep -oE '"p50_ms":[0-9.]+,"p99_ms":[0-9.]+,"p999_ms":[0-9.]+,"max_ms":[0-9.]+')
 echo "$b $out"
done; done
