# per_round.py RUN.json [bar_ns]: per-round ratios (32 B) to the faster ring and to aeron-excl, rounds whose probes are all under bar
import json,sys,statistics
bar=float(sys.argv[2]) if len(sys.argv)>2 else 1000
d=json.load(open(sys.argv[1])); c={t['name']:t['rounds'] for t in d['throughput'] if t['size']==32}
ks=[k for k in range(len(c['bare-ring'])) if all(c[n][k]['probe_before_ns']<bar and c[n][k]['probe_after_ns']<bar for n in c)]
print('rounds', len(ks), 'of', len(c['bare-ring']), 'probe bar', bar)
for s in c:
    if not s.startswith('crs'): continue
    rr=[c[s][k]['msgs_per_s']/max(c['bare-ring'][k]['msgs_per_s'],c['inband-ring'][k]['msgs_per_s']) for k in ks]
    line=f'{s:14} / faster ring {statistics.median(rr):.3f} [{min(rr):.2f}-{max(rr):.2f}]'
    if 'aeron-excl' in c:
        ra=[c[s][k]['msgs_per_s']/c['aeron-excl'][k]['msgs_per_s'] for k in ks]
        line+=f'  / aeron-excl {statistics.median(ra):.3f} [{min(ra):.2f}-{max(ra):.2f}]'
    print(line+f'  median {statistics.median([c[s][k]["msgs_per_s"]/1e6 for k in ks]):.1f} M/s')
if 'crs-batch' in c:
    rb=[c['crs-batch'][k]['msgs_per_s']/c['crs-defaults'][k]['msgs_per_s'] for k in ks]
    print(f'crs-batch / crs-defaults {statistics.median(rb):.3f}, above 1 in {sum(x>1 for x in rb)} of {len(rb)}')
