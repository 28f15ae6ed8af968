# usage: python3 faster.py throughput-pace.json (32 B cells of one crs-bench run)
import json,sys,statistics
# per round: scenario / max(bare-ring, inband-ring) and / aeron-excl; rounds where every cell had both probes < 150 ns
d=json.load(open(sys.argv[1])); c={t['name']:t['rounds'] for t in d['throughput'] if t['size']==32}
fast=[all(c[n][k]['probe_before_ns']<150 and c[n][k]['probe_after_ns']<150 for n in c) for k in range(len(c['bare-ring']))]
print('fast rounds', sum(fast), 'of', len(fast))
for s in ('crs-defaults','crs-batch','crs-take'):
    if s not in c: continue
    rr=[c[s][k]['msgs_per_s']/max(c['bare-ring'][k]['msgs_per_s'],c['inband-ring'][k]['msgs_per_s']) for k in range(len(fast)) if fast[k]]
    line=f'{s:13} / faster ring: median {statistics.median(rr):.3f} [{min(rr):.2f}-{max(rr):.2f}]'
    if 'aeron-excl' in c:
        ra=[c[s][k]['msgs_per_s']/c['aeron-excl'][k]['msgs_per_s'] for k in range(len(fast)) if fast[k]]
        line+=f'   / aeron-excl: median {statistics.median(ra):.3f} [{min(ra):.2f}-{max(ra):.2f}]'
    med=statistics.median([c[s][k]['msgs_per_s']/1e6 for k in range(len(fast)) if fast[k]])
    print(line+f'   median {med:.1f} M msgs/s')
if 'crs-batch' in c:
    rb=[c['crs-batch'][k]['msgs_per_s']/c['crs-defaults'][k]['msgs_per_s'] for k in range(len(fast)) if fast[k]]
    print(f'crs-batch / crs-defaults: median {statistics.median(rb):.3f}, above 1 in {sum(x>1 for x in rb)} of {len(rb)}')
