#!/bin/bash
# kmwrec.sh BACKEND TOPIC OUT: one kmw.sh run under perf record (cpu-clock, 4999 Hz, call graphs).
B=$1; T=$2; O=$3; A=${KRING_TOOL:-/work/main/target/release/kring}
perf record -q -F 4999 -e cpu-clock -g -o $O taskset -c 1 $A perf produce --bootstrap 127.0.0.1:9092 --topic $T \
  --records 1000000 --key-size 16 --payload-file /work/main/perf/target/payloads-200.txt --acks all \
  --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 --property kring.io.backend=$B 2>&1 | grep -oE '"elapsed_s":[0-9.]+'
