# Medians per scenario and size over the rounds whose probes before and
# after were both in one VM state: fast (< 150 ns) or slow (>= 250 ns).
import json, statistics, sys
d = json.load(open(sys.argv[1]))
cells = d['throughput']
sizes = sorted({c['size'] for c in cells})
names = []
for c in cells:
    if c['name'] not in names:
        names.append(c['name'])
def st(r):
    a, b = r.get('probe_before_ns', 1e9), r.get('probe_after_ns', 1e9)
    if a < 150 and b < 150 and r.get('probe_cpus_before',0) >= 1.5 and r.get('probe_cpus_after',0) >= 1.5: return 'fast'
    if a >= 250 and b >= 250 and a < 1000 and b < 1000: return 'slow'
    return None
for state in ('fast', 'slow'):
    print(f'== {state} state: median M msgs/s (rounds)')
    print('size  ' + ''.join(f'{n:>20}' for n in names))
    for s in sizes:
        row = f'{s:<6}'
        for n in names:
            c = [c for c in cells if c['name'] == n and c['size'] == s]
            v = [r['msgs_per_s'] / 1e6 for r in (c[0]['rounds'] if c else []) if r.get('ok') and st(r) == state]
            row += f'{(statistics.median(v) if v else float("nan")):>16.2f} ({len(v)})'
        print(row)
