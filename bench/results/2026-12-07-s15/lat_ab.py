# lat_ab.py PACK.jsonl.gz SCENARIO REF : per build, the median over clean
# rounds of SCENARIO's p50 (and p99) over REF's in the same round.
# A pack holds one crs-bench --json document per line: {"series",
# "build", "run", "doc"}; runs of one series alternated their builds.
import gzip, json, statistics as st, sys
pack, scen, ref = sys.argv[1:4]
by = {}
for line in gzip.open(pack, 'rt'):
    e = json.loads(line)
    build = e['series'] + ' ' + e['build']
    cells = {c['name']: c for c in e['doc']['latency']}
    if scen not in cells or ref not in cells:
        continue
    for a, r in zip(cells[scen]['rounds'], cells[ref]['rounds']):
        if a.get('clean') and r.get('clean'):
            by.setdefault(build, []).append((a['p50'] / r['p50'], a['p99'] / r['p99'], a['p50']))
for build, v in sorted(by.items()):
    q = st.quantiles([x[0] for x in v], n=4)
    print(f"{build:14} rounds {len(v):3}  p50 {scen}/{ref} {st.median(x[0] for x in v):.3f} "
          f"[{q[0]:.3f}-{q[2]:.3f}]  p99 {st.median(x[1] for x in v):.3f}  "
          f"{scen} p50 {st.median(x[2] for x in v):.0f} ns")
