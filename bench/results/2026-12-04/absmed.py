import json,statistics as st,sys
d={}
for l in open(sys.argv[1]):
    r=json.loads(l)
    for c in r['doc']['throughput']:
        for rd in c['rounds']:
            if rd['ok']: d.setdefault((c['name'],r['build']),[]).append(rd['msgs_per_s']/1e6)
for k in sorted(d): print("%-14s %s  median %6.1f  n=%d  min %.1f max %.1f"%(k[0],k[1],st.median(d[k]),len(d[k]),min(d[k]),max(d[k])))
