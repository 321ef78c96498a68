import sys,statistics as st,re
d={}
for l in open(sys.argv[1]):
    m=re.match(r'(\S+)\s+snd\s+(\S+)\s+rps\s+(\S+)\s+task\s+(\S+) ms user\s+(\S+) sys\s+(\S+) faults\s+(\S+)',l)
    if not m: continue
    d.setdefault(m.group(1),[]).append([float(x) for x in m.groups()[1:]])
for k,v in d.items():
    med=[st.median(x[i] for x in v) for i in range(6)]
    print('%-16s n=%d snd %.1f rps %.0f task %.1f (%.1f-%.1f) user %.1f sys %.1f faults %.0f' % (k,len(v),med[0],med[1],med[2],min(x[2] for x in v),max(x[2] for x in v),med[3],med[4],med[5]))
