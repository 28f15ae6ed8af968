# latab.py OUT.jsonl N SIZES BIN...: run crs-bench's spinning ping-pong
# (crs-spin, raw-spin, aeron-spin; 3 rounds a run) N times per build,
# rotating the order of the builds, one JSON line per run appended to OUT;
# then per size and build the medians over rounds of crs-spin's p50 and
# of its per-round ratios to raw-spin and aeron-spin ('slow': the rounds
# where raw-spin took over 200 ns, the VM's cross-core state). N = 0 only
# reports OUT. Build k is the k-th BIN.
import json, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs

out, n, sizes, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
args = ["--section", "latency", "--lat-size", sizes, "--rounds", "3", "--json",
        "--scenario", "crs-spin", "--scenario", "raw-spin", "--scenario", "aeron-spin"]
runs.rotate(out, n, bins, args)
res = {}
for line in open(out):
    e = json.loads(line)
    for size in {t['size'] for t in e['doc']['latency']}:
        L = {t['name']: t['rounds'] for t in e['doc']['latency'] if t['size'] == size}
        for k in range(len(L['crs-spin'])):
            g = lambda s: L[s][k]['p50']
            c, rw, ae = g('crs-spin'), g('raw-spin'), g('aeron-spin')
            d = res.setdefault((size, e['build']), {'crs': [], '/raw': [], '/aeron': [], 'slow crs': [], 'slow /raw': []})
            d['crs'].append(c); d['/raw'].append(c / rw); d['/aeron'].append(c / ae)
            if rw > 200: d['slow crs'].append(c); d['slow /raw'].append(c / rw)
for key in sorted(res):
    print(key, {k: (round(statistics.median(v), 3), len(v)) for k, v in res[key].items() if v})
