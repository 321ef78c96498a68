#!/bin/bash
# A/B of two kring builds reading the same topic (perf stat: task clock, syscalls).
# usage: abc.sh ROUNDS TOPIC BACKEND BIN_A BIN_B
for r in $(seq $1); do for bin in $4 $5; do
  out=$(perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -x, -o /tmp/abc.stat taskset -c 1 $bin perf consume --bootstrap 127.0.0.1:9092 --topic $2 --records 1000000 --property kring.io.backend=$3 2>&1 | grep -oE '"elapsed_s":[0-9.]+' | cut -d: -f2)
  echo "$r $(basename $bin) $3 elapsed=$out $(awk -F, '/^[0-9]/{printf "%s=%s ", $3, $1}' /tmp/abc.stat | sed 's/raw_syscalls:sys_enter/sys/')"
done; done
