# ab-pace-clock.jsonl: 32 B, the pacing wait counted in pause hints
# (0e3711c, "hints") and timed by the clock (the next commit, "clock"),
# alternating, 30 runs each of 3 rounds. Per round: each crs scenario over
# the faster of the two rings of that round; medians over the rounds whose
# cells all had both probes < 150 ns, and a permutation test of the
# difference of the medians.
# usage: python3 ab_pace_clock.py ab-pace-clock.jsonl
import json, random, statistics, sys
from collections import defaultdict
rounds = defaultdict(dict)
for line in open(sys.argv[1]):
    r = json.loads(line)
    rounds[(r['build'], r['run'], r['round'])][r['scenario']] = r
ratios = defaultdict(lambda: defaultdict(list))
for (build, _, _), cells in rounds.items():
    if not all(c['ok'] and c['probe_before_ns'] < 150 and c['probe_after_ns'] < 150
               for c in cells.values()):
        continue
    ring = max(cells['bare-ring']['msgs_per_s'], cells['inband-ring']['msgs_per_s'])
    for s in ('crs-defaults', 'crs-batch', 'crs-take'):
        ratios[s][build].append(cells[s]['msgs_per_s'] / ring)
random.seed(1)
for s, by in ratios.items():
    a, b = by['hints'], by['clock']
    obs = statistics.median(b) - statistics.median(a)
    pool, hits = a + b, 0
    for _ in range(5000):
        random.shuffle(pool)
        d = statistics.median(pool[len(a):]) - statistics.median(pool[:len(a)])
        hits += abs(d) >= abs(obs)
    print(f'{s:13} / faster ring, fast rounds: hints {statistics.median(a):.3f} ({len(a)}), '
          f'clock {statistics.median(b):.3f} ({len(b)}), difference {obs:+.3f}, p {hits / 5000:.3f}')
