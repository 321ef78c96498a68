import sys,statistics as st
d={}
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<11: continue
    d.setdefault(f[0],[]).append((float(f[2]),float(f[4]),float(f[6]),int(f[8]),float(f[10])))
for k,v in d.items():
    print(f"{k:6} n={len(v)} task med {st.median(x[0] for x in v):.1f} ({min(x[0] for x in v):.0f}-{max(x[0] for x in v):.0f}) user {st.median(x[1] for x in v):.1f} sys {st.median(x[2] for x in v):.1f} faults {st.median(x[3] for x in v):.0f} snd {st.median(x[4] for x in v):.1f} ({min(x[4] for x in v):.0f}-{max(x[4] for x in v):.0f})")
