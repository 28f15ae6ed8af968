# allr.py FILE.jsonl [max_probe_ns=300]: per-round ratios (32 B) of each
# crs scenario to the faster ring of the same round, over the rounds
# whose probes are all under the bar; medians per build (A, B) and a
# permutation test of the difference of medians.
import json, random, statistics, sys


def ratios(path, bar):
    res = {}
    for line in open(path):
        e = json.loads(line)
        c = {t['name']: t['rounds'] for t in e['doc']['throughput'] if t['size'] == 32}
        for k in range(len(c['bare-ring'])):
            if not all(c[s][k]['probe_before_ns'] < bar and c[s][k]['probe_after_ns'] < bar for s in c):
                continue
            ring = max(c['bare-ring'][k]['msgs_per_s'], c['inband-ring'][k]['msgs_per_s'])
            for s in c:
                if s.startswith('crs'):
                    res.setdefault(e['build'], {}).setdefault(s, []).append(c[s][k]['msgs_per_s'] / ring)
    return res


def report(path, bar=300.0):
    res = ratios(path, bar)
    for s in sorted(res.get('A', {})):
        ra, rb = res['A'][s], res.get('B', {}).get(s, [])
        if not rb:
            continue
        ma, mb = statistics.median(ra), statistics.median(rb)
        pool, obs, hit, r = ra + rb, abs(mb - ma), 0, random.Random(1)
        for _ in range(4000):
            r.shuffle(pool)
            if abs(statistics.median(pool[len(ra):]) - statistics.median(pool[:len(ra)])) >= obs:
                hit += 1
        print(f"{s:14} A {ma:.3f} n={len(ra)}  B {mb:.3f} n={len(rb)}  B/A {mb/ma:.3f}  p {hit/4000:.3f}")


if __name__ == '__main__':
    report(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 300.0)
