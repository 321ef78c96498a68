#!/bin/bash
# consume-many by hand: fresh topic (256 partitions, RF 3), filled as perf/run fills it,
# then read at once by backend A and then backend B (alternating who goes first);
# perf stat counts the reader's syscalls and context switches.
K=${KBIN:-/work/main/target/release/kring}; BS=127.0.0.1:9092
for r in $(seq $1); do
  t=cm-$r-$RANDOM; $K topics create -b $BS $t -p 256 -r 3 >/dev/null; sleep 12
  taskset -c 1 $K perf produce --bootstrap $BS --topic $t --records 1000000 --key-size 16 --payload-file /work/main/perf/target/payloads-200.txt --acks all --idempotence true --compression lz4 --linger-ms 5 --batch-size 65536 >/dev/null 2>&1
  if [ $((r % 2)) = 1 ]; then order="uring epoll uring epoll"; else order="epoll uring epoll uring"; fi
  for b in $order; do
    out=$(perf stat -e task-clock,context-switches,raw_syscalls:sys_enter,page-faults -x, -o /tmp/cm.stat taskset -c 1 $K perf consume --bootstrap $BS --topic $t --records 1000000 --property kring.io.backend=$b 2>&1 | grep -oE '"elapsed_s":[0-9.]+')
    echo "$r $b $out $(awk -F, '{printf "%s=%s ", $3, $1}' /tmp/cm.stat | sed 's/raw_syscalls:sys_enter/sys/')"
  done
  $K topics delete -b $BS $t >/dev/null 2>&1; sleep 3
done
