# ab.py OUT.jsonl N A_BIN B_BIN [rounds]: alternate crs-bench runs of two
# builds (32 B: crs-defaults, crs-take, crs-batch, bare and in-band
# rings), N times each, one JSON line per run appended to OUT; then
# allr.py's report of OUT.
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allr

out, n, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rounds = sys.argv[5] if len(sys.argv) > 5 else "3"
args = ["--section", "throughput", "--size", "32", "--rounds", rounds, "--json"]
for s in ("crs-defaults", "crs-take", "crs-batch", "bare-ring", "inband-ring"):
    args += ["--scenario", s]
with open(out, "a") as f:
    for i in range(n):
        order = [("A", a), ("B", b)] if i % 2 == 0 else [("B", b), ("A", a)]
        for tag, binp in order:
            r = subprocess.run([binp] + args, capture_output=True, text=True)
            try:
                d = json.loads(r.stdout)
            except ValueError:
                print("bad run", tag, r.stderr[-300:])
                continue
            f.write(json.dumps({"build": tag, "doc": d}) + "\n")
            f.flush()
allr.report(out)
