# runs.py: the run loop the A/B scripts share. rotate() runs crs-bench with
# args once per build, n times, each time starting one build further on
# (two builds: A B, B A, ...), and appends one JSON line per run to out:
# {"build": its tag, "doc": crs-bench's JSON document}.
import json, subprocess


def rotate(out, n, bins, args, tags=None):
    tags = tags or [str(k) for k in range(len(bins))]
    with open(out, "a") as f:
        for i in range(n):
            for j in range(len(bins)):
                k = (i + j) % len(bins)
                r = subprocess.run([bins[k]] + args, capture_output=True, text=True)
                try:
                    d = json.loads(r.stdout)
                except ValueError:
                    print("bad run", tags[k], r.stderr[-300:])
                    continue
                f.write(json.dumps({"build": tags[k], "doc": d}) + "\n")
                f.flush()
