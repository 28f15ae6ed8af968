# large-ab.jsonl: crs-defaults over the faster of the two rings, per round,
# old (34aaed2) against new (b02dac0) builds run alternately; medians over
# all rounds and over fast-state rounds, and a permutation test of the
# difference of medians. usage: python3 large_ab.py large-ab.jsonl
import json, random, statistics, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]
by = defaultdict(dict)
for r in rows:
    by[(r['build'], r['run'], r['round'], r['size'])][r['scenario']] = r
ratios = defaultdict(lambda: {'all': [], 'fast': []})
for (build, _, _, size), s in by.items():
    a, ring = s['crs-defaults'], max(s['bare-ring'], s['inband-ring'], key=lambda x: x['msgs_per_s'])
    x = a['msgs_per_s'] / ring['msgs_per_s']
    ratios[(build, size)]['all'].append(x)
    if all(r['probe_before_ns'] < 150 and r['probe_after_ns'] < 150 for r in s.values()):
        ratios[(build, size)]['fast'].append(x)
random.seed(1)
for size in sorted({k[1] for k in ratios}):
    for build in ('old', 'new'):
        q = ratios[(build, size)]
        print(f'{size:>8} {build}: all {statistics.median(q["all"]):.3f} ({len(q["all"])} rounds), '
              f'fast {statistics.median(q["fast"]):.3f} ({len(q["fast"])})')
    o, n = ratios[('old', size)]['all'], ratios[('new', size)]['all']
    obs = statistics.median(n) - statistics.median(o)
    pool, k = o + n, 0
    for _ in range(5000):
        random.shuffle(pool)
        k += abs(statistics.median(pool[:len(n)]) - statistics.median(pool[len(n):])) >= abs(obs)
    print(f'{size:>8} new - old: {obs:+.3f}, permutation p = {k / 5000:.2f}')
