# ab.py OUT N SIZE ROUNDS BIN... : alternate crs-bench builds, per-round ratio of each crs scenario to the faster ring
import json, subprocess, sys, random, statistics as st
out, n, size, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
bins = sys.argv[5:]
scen = ["crs-defaults", "crs-take", "crs-batch", "bare-ring", "inband-ring"]
args = ["--section", "throughput", "--size", size, "--rounds", rounds, "--json"]
for s in scen: args += ["--scenario", s]
if n:
  with open(out, "a") as f:
    for i in range(n):
        for j in range(len(bins)):
            k = (i + j) % len(bins)
            r = subprocess.run([bins[k]] + args, capture_output=True, text=True)
            try: d = json.loads(r.stdout)
            except ValueError: print("bad", bins[k], r.stderr[-300:]); continue
            f.write(json.dumps({"build": bins[k], "doc": d}) + "\n"); f.flush()
res = {}
for line in open(out):
    e = json.loads(line)
    for sz in set(t['size'] for t in e['doc']['throughput']):
        c = {t['name']: t['rounds'] for t in e['doc']['throughput'] if t['size'] == sz}
        for k in range(len(c['bare-ring'])):
            if not all(c[s][k].get('clean') for s in c): continue
            ring = max(c['bare-ring'][k]['msgs_per_s'], c['inband-ring'][k]['msgs_per_s'])
            for s in c:
                if s.startswith('crs'):
                    res.setdefault((sz, s), {}).setdefault(e['build'], []).append((c[s][k]['msgs_per_s'] / ring, c[s][k]['msgs_per_s']))
for (sz, s), byb in sorted(res.items()):
    line = f"{sz:>6} {s:14}"
    meds = []
    for b in bins:
        v = byb.get(b, [])
        if not v: continue
        m = st.median(x[0] for x in v); meds.append([x[0] for x in v])
        line += f"  {b.split('/')[-1]}: {m:.3f} ({st.median(x[1] for x in v)/1e6:.1f}M, n={len(v)})"
    if len(meds) == 2:
        a, b = meds; obs = st.median(b) - st.median(a); pool = a + b; rr = random.Random(1); hit = 0
        for _ in range(2000):
            rr.shuffle(pool)
            if abs(st.median(pool[len(a):]) - st.median(pool[:len(a)])) >= abs(obs): hit += 1
        line += f"  B/A {st.median(b)/st.median(a):.3f} p={hit/2000:.3f}"
    print(line)
