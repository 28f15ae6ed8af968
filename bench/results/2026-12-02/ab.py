# ab.py OUT.jsonl N A_BIN B_BIN [rounds]: alternate crs-bench runs of two builds
# (32 B: crs-defaults, crs-take, crs-batch, bare and in-band rings), N
# times each, one JSON line per run; then per-round ratios to the faster
# ring of the same round (fast-state rounds only: probes < 150 ns).
import json, subprocess, sys, statistics, random
out, n, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rounds = sys.argv[5] if len(sys.argv) > 5 else "3"
scn = ["crs-defaults", "crs-take", "crs-batch", "bare-ring", "inband-ring"]
args = ["--section", "throughput", "--size", "32", "--rounds", rounds, "--json"]
for s in scn:
    args += ["--scenario", s]
with open(out, "a") as f:
    for i in range(n):
        order = [("A", a), ("B", b)]
        if i % 2: order.reverse()
        for tag, binp in order:
            r = subprocess.run([binp] + args, capture_output=True, text=True)
            try:
                d = json.loads(r.stdout)
            except Exception:
                print("bad run", tag, r.stderr[-300:]); continue
            f.write(json.dumps({"build": tag, "doc": d}) + "\n"); f.flush()
def ratios(path):
    res = {"A": {}, "B": {}}
    for line in open(path):
        e = json.loads(line); c = {t['name']: t['rounds'] for t in e['doc']['throughput'] if t['size'] == 32}
        for k in range(len(c['bare-ring'])):
            if not all(c[s][k]['probe_before_ns'] < 150 and c[s][k]['probe_after_ns'] < 150 for s in c): continue
            ring = max(c['bare-ring'][k]['msgs_per_s'], c['inband-ring'][k]['msgs_per_s'])
            for s in ("crs-defaults", "crs-take", "crs-batch"):
                res[e['build']].setdefault(s, []).append(c[s][k]['msgs_per_s'] / ring)
    return res
res = ratios(out)
for s in ("crs-defaults", "crs-take", "crs-batch"):
    ra, rb = res["A"].get(s, []), res["B"].get(s, [])
    if not ra or not rb: continue
    ma, mb = statistics.median(ra), statistics.median(rb)
    # permutation test on the difference of medians
    pool = ra + rb; obs = abs(mb - ma); hit = 0; rnd = random.Random(1)
    for _ in range(2000):
        rnd.shuffle(pool)
        if abs(statistics.median(pool[len(ra):]) - statistics.median(pool[:len(ra)])) >= obs: hit += 1
    print(f"{s:13} A {ma:.3f} (n={len(ra)})  B {mb:.3f} (n={len(rb)})  B/A {mb/ma:.3f}  p {hit/2000:.3f}")
