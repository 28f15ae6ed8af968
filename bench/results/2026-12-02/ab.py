# ab.py OUT.jsonl N A_BIN B_BIN [rounds]: alternate crs-bench runs of two
# builds (32 B: crs-defaults, crs-take, crs-batch, bare and in-band
# rings), N times each, one JSON line per run appended to OUT; then
# allr.py's report of OUT.
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allr
import runs

out, n, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rounds = sys.argv[5] if len(sys.argv) > 5 else "3"
args = ["--section", "throughput", "--size", "32", "--rounds", rounds, "--json"]
for s in ("crs-defaults", "crs-take", "crs-batch", "bare-ring", "inband-ring"):
    args += ["--scenario", s]
runs.rotate(out, n, [a, b], args, ["A", "B"])
allr.report(out)
