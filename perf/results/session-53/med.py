import statistics as st,collections,sys
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    b,tc,pf,el=l.split(); d[b].append((float(tc),float(pf),float(el)))
for b,v in d.items(): print(b, 'task-clock med', round(st.median(x[0] for x in v),1), 'range', min(x[0] for x in v), max(x[0] for x in v), 'faults', st.median(x[1] for x in v), 'elapsed', st.median(x[2] for x in v))
