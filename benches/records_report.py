#!/usr/bin/env python3
"""Summarise a `cargo bench --bench records` run as Markdown tables.

Reads criterion's results under target/criterion (or the directory given as the first
argument) and prints, per workload, records/s and GB/s (10^9 bytes of uncompressed
batch per second) from the median, kring against kafka-protocol in the same run, the
lz4/zstd batch encode against the raw codec on the same bytes, and ns per record for
borrowed iteration.
"""

import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
results = {}
for bench in root.glob("**/new/benchmark.json"):
    meta = json.loads(bench.read_text())
    est = json.loads((bench.parent / "estimates.json").read_text())
    group, func, param = meta["group_id"], meta["function_id"], meta["value_str"]
    tp = meta.get("throughput") or {}
    results[(group, func, param)] = {
        "ns": est["median"]["point_estimate"],
        "bytes": tp.get("Bytes") or tp.get("BytesDecimal"),
        "elems": tp.get("Elements"),
    }


def records(param):
    return int(param.split("x")[0])


def order(param):
    n, rest = param.split("x")
    size = rest.replace("+h", "")
    return (int(n), int(size), rest.endswith("+h"))


def gbs(r):
    return r["bytes"] / r["ns"] if r and r.get("bytes") else float("nan")


def rps(r, param):
    return records(param) / (r["ns"] * 1e-9)


def fmt_rate(x):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.2f} {unit}"
    return f"{x:.0f}"


params = sorted({p for (_, _, p) in results}, key=order)
codecs = ["none", "gzip", "snappy", "lz4", "zstd"]

for kind in ("encode", "decode"):
    print(f"\n### {kind}\n")
    extra = kind == "encode"
    head = "| codec | workload | kring rec/s | kring GB/s | kafka-protocol GB/s | ratio |"
    if extra:
        head += " ratio vs kafka-protocol+build |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for codec in codecs:
        group = f"{kind}/{codec}"
        for p in params:
            k = results.get((group, "kring", p))
            q = results.get((group, "kafka-protocol", p))
            if not k:
                continue
            row = f"| {codec} | {p} | {fmt_rate(rps(k, p))} | {gbs(k):.2f} | "
            row += f"{gbs(q):.2f} | {q['ns'] / k['ns']:.2f}x |" if q else "- | - |"
            if extra:
                b = results.get((group, "kafka-protocol+build", p))
                row += f" {b['ns'] / k['ns']:.2f}x |" if b else " - |"
            print(row)

print("\n### lz4 / zstd batch encode against the raw codec on the same bytes\n")
print("| codec | workload | kring batch GB/s | raw codec | raw GB/s | batch / raw |")
print("|---|---|---|---|---|---|")
for codec, raws in (("lz4", ["lz4_flex-block", "lz4_flex-frame"]), ("zstd", ["zstd-bulk"])):
    for p in params:
        k = results.get((f"encode/{codec}", "kring", p))
        for raw in raws:
            r = results.get((f"encode/{codec}", f"raw-{raw}", p))
            if k and r:
                print(f"| {codec} | {p} | {gbs(k):.2f} | {raw} | {gbs(r):.2f} | {r['ns'] / k['ns']:.2f}x |")

print("\n### borrowed iteration (no CRC), kring\n")
print("| workload | ns per record | records/s |")
print("|---|---|---|")
for p in params:
    r = results.get(("iterate", "kring", p))
    if r:
        n = records(p)
        print(f"| {p} | {r['ns'] / n:.1f} | {fmt_rate(n / (r['ns'] * 1e-9))} |")
