#!/usr/bin/env python3
"""paired.py RUN_RAW.jsonl WORKLOAD A B: per-round CPU-per-record ratios A/B (same run index), their median and range."""
import json,sys,statistics as st
f,w,a,b=sys.argv[1:5]
cpu={}
for l in open(f):
    r=json.loads(l)
    if r.get('type')=='meta' or r.get('workload')!=w or r.get('exit')!=0: continue
    res=r.get('result') or {}
    n=res.get('records') or res.get('records_delivered') or 0
    if not n: continue
    cpu[(r['client'],r['run'])]=(r['utime_s']+r['stime_s'])/n*1e6
ratios=[cpu[(a,i)]/cpu[(b,i)] for (c,i) in cpu if c==a and (b,i) in cpu]
print(f"{w} {a}/{b}: rounds {len(ratios)} median {st.median(ratios):.3f} range {min(ratios):.3f}-{max(ratios):.3f} ({sum(x<1 for x in ratios)} of {len(ratios)} below 1)")
