# ab_aeron.py OUT.jsonl N A_BIN B_BIN [rounds]: as ../2026-12-02/ab.py,
# with Aeron's exclusive publication in every run, so that crs's ratio to
# Aeron is compared per build in the same alternation; absmed.py and
# allr.py report OUT.
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-02"))
import runs

out, n, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rounds = sys.argv[5] if len(sys.argv) > 5 else "5"
args = ["--section", "throughput", "--size", "32", "--rounds", rounds, "--json"]
for s in ("crs-defaults", "crs-take", "crs-batch", "bare-ring", "inband-ring", "aeron-excl"):
    args += ["--scenario", s]
runs.rotate(out, n, [a, b], args, ["A", "B"])
