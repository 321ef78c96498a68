#!/bin/bash
# per-thread CPU and context switches of one keyed run
B=$1; A=/work/main/target/release/kring
taskset -c 1 $A perf produce --bootstrap 127.0.0.1:9092 --topic kmw --records 1000000 --key-size 16 \
    --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 \
    --linger-ms 5 --batch-size 65536 --property kring.io.backend=$B > /tmp/pt.out 2>&1 &
P=$!; sleep 0.3
last=""
while kill -0 $P 2>/dev/null; do
  snap=$(for t in /proc/$P/task/*; do echo "$(cat $t/comm 2>/dev/null)|$(awk '{print $14+$15}' $t/stat 2>/dev/null)|$(awk '/voluntary_ctxt_switches/{printf "%s ", $2}' $t/status 2>/dev/null)"; done)
  [ -n "$snap" ] && last="$snap"; sleep 0.05
done
echo "== $B $(grep -oE '"elapsed_s":[0-9.]+' /tmp/pt.out)"; echo "$last" | sort
