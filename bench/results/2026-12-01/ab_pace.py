# ab-pace.jsonl: 32 B, the build before the pacing (876f059) and after
# (1288ec3 less its paced counter) run alternately, 4 runs each of 9 rounds. Per round: each crs
# scenario over the faster of the two rings of that round; medians over
# the rounds whose cells all had both probes < 150 ns, and over all.
# usage: python3 ab_pace.py ab-pace.jsonl
import json, statistics, sys
from collections import defaultdict
rounds = defaultdict(dict)
for line in open(sys.argv[1]):
    r = json.loads(line)
    rounds[(r['build'], r['run'], r['round'])][r['scenario']] = r
for s in ('crs-defaults', 'crs-batch', 'crs-take'):
    for build in ('before', 'after'):
        fast, every = [], []
        for (b, _, _), cells in rounds.items():
            if b != build:
                continue
            ring = max(cells['bare-ring']['msgs_per_s'], cells['inband-ring']['msgs_per_s'])
            x = cells[s]['msgs_per_s'] / ring
            every.append(x)
            if all(c['probe_before_ns'] < 150 and c['probe_after_ns'] < 150 for c in cells.values()):
                fast.append(x)
        print(f'{s:13} {build:6}: / faster ring, fast rounds {statistics.median(fast):.3f} ({len(fast)}), '
              f'all rounds {statistics.median(every):.3f} ({len(every)})')
