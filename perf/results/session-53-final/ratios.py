import json, sys, statistics as st
runs = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("type") != "run": continue
    res = r.get("result") or {}
    if not res: continue
    cpu = (r.get("utime_s", 0) + r.get("stime_s", 0)) / (res.get("records", 1) / 1e6)
    key = (r["workload"], r["client"])
    runs.setdefault(key, []).append(dict(rps=res["records"] / res["elapsed_s"], cpu=cpu,
        rss=r.get("maxrss_kib", 0) / 1024, p99=res.get("p99_ms"), p999=res.get("p999_ms"), p50=res.get("p50_ms"), run=r.get("run")))
wls = []
for (w, c) in runs:
    if w not in wls: wls.append(w)
for w in wls:
    print("==", w)
    med = {}
    for (ww, c), v in runs.items():
        if ww != w: continue
        med[c] = {k: st.median([x[k] for x in v if x[k] is not None]) if any(x[k] is not None for x in v) else None for k in ("rps", "cpu", "rss", "p50", "p99", "p999")}
        rs=' '.join('%.0fk' % (x["rps"]/1e3) for x in v); cs=' '.join('%.3f' % x["cpu"] for x in v); m=med[c]
        print("  %-12s rps %-28s med %.0fk  cpu/M %-22s med %.3f rss %.0f p50 %s p99 %s p999 %s" % (c, rs, m["rps"]/1e3, cs, m["cpu"], m["rss"], m["p50"], m["p99"], m["p999"]))
    k = med.get("kring")
    if k:
        for c, m in med.items():
            if c == "kring": continue
            print(f"  kring ÷ {c:12s} rps {k['rps']/m['rps']:.2f}  cpu {k['cpu']/m['cpu']:.2f}" + (f"  p99 {k['p99']/m['p99']:.2f}" if k['p99'] and m['p99'] else ""))
