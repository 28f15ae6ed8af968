# ab_sizes.py OUT.jsonl N A_BIN B_BIN [SIZES]: alternate crs-bench
# throughput runs of two builds (crs-defaults, crs-batch; default sizes
# 4K,1M; 3 rounds a run), N times each; then per size, scenario and
# build the median of per-round ratios to the bare ring. At 1 MiB the
# bare ring's own rate varies more than crs's: compare absolute rates
# there too (JSON: throughput[].rounds[].msgs_per_s).
import json, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs

out, n, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
SIZES = sys.argv[5] if len(sys.argv) > 5 else "4K,1M"
args = ["--section", "throughput", "--size", SIZES, "--rounds", "3", "--json", "--scenario", "crs-defaults", "--scenario", "crs-batch"]
runs.rotate(out, n, [a, b], args, ["A", "B"])
res = {}
for line in open(out):
    e = json.loads(line)
    for size in {t['size'] for t in e['doc']['throughput']}:
        c = {t['name']: t['rounds'] for t in e['doc']['throughput'] if t['size'] == size}
        for k in range(len(c['bare-ring'])):
            for s in c:
                if s.startswith('crs'):
                    res.setdefault((size, s, e['build']), []).append(c[s][k]['msgs_per_s'] / c['bare-ring'][k]['msgs_per_s'])
for key in sorted(res):
    print(key, round(statistics.median(res[key]), 3), len(res[key]))
