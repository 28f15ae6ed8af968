# latp99.py OUT.jsonl N SIZES BIN...: crs-bench's spinning ping-pong
# (crs-spin, raw-spin, aeron-spin; 3 rounds a run) N times per build,
# rotating the builds (../2026-12-02/runs.py); then per size and build the
# medians over rounds of crs-spin's p50, p99 and p99.9 and of their
# per-round ratios to raw-spin's and aeron-spin's. N = 0 only reports OUT.
import json, os, statistics, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-02"))
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
            d = res.setdefault((size, e['build']), {})
            for q in ('p50', 'p99', 'p99.9'):
                c = L['crs-spin'][k][q]
                d.setdefault(q, []).append(c)
                for peer in ('raw-spin', 'aeron-spin'):
                    if peer in L and L[peer][k]['ok']:
                        d.setdefault(q + '/' + peer.split('-')[0], []).append(c / L[peer][k][q])
for key in sorted(res):
    print(key, {k: round(statistics.median(v), 3) for k, v in res[key].items()}, 'rounds', len(res[key]['p50']))
