import sys, struct, glob, statistics
for topic in sys.argv[1:]:
    counts=[]; sizes=[]
    for d in glob.glob(f"target/kafka/node*/data/{topic}-*"):
        for f in glob.glob(d+"/*.log"):
            b=open(f,'rb').read(); o=0
            while o+12<=len(b):
                base,ln=struct.unpack(">qi",b[o:o+12])
                if ln<=0: break
                cnt=struct.unpack(">i",b[o+57:o+61])[0]
                counts.append(cnt); sizes.append(ln+12); o+=12+ln
    print(topic, "batches", len(counts), "records", sum(counts), "mean records/batch %.1f"%(sum(counts)/max(1,len(counts))), "median", statistics.median(counts) if counts else 0, "mean bytes %.0f"%(sum(sizes)/max(1,len(sizes))))
