#!/bin/sh
# test_args.sh - crs-bench cannot mislead from its command line: an unknown
# scenario, section or option, a missing argument, a stray word and values
# out of range are usage errors (status 2, one line naming the fault)
# instead of a run; -h and --help print the usage and exit 0; a section
# not run is null in the JSON, not an empty list or a zero; and the Aeron
# scenarios are skipped, not failed, in a build without Aeron.
#
# usage: test_args.sh CRS_BENCH
set -u
bench=${1:?usage: test_args.sh CRS_BENCH}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crs-bench-args.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

# usage_error WANT ARGS...: exit 2 at once, stderr naming WANT.
usage_error() {
	want=$1
	shift
	timeout 10 "$bench" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "crs-bench $*: status $rc, not 2"
	grep -q -- "$want" "$tmp/err" || fail "crs-bench $*: no '$want' in: $(cat "$tmp/err")"
	[ ! -s "$tmp/out" ] || fail "crs-bench $*: wrote to stdout"
}
usage_error "no scenario 'nope'" --scenario nope
usage_error "no scenario 'crs-spin-p12'" --scenario crs-spin-p128 --scenario crs-spin-p12
usage_error "unknown option --bogus" --bogus
usage_error "unknown option -x" -x
usage_error "--rounds needs an argument" --rounds
usage_error "unexpected argument 'extra'" extra
usage_error "--section: unknown nope" --section nope
usage_error "--rounds: 1..50" --rounds 0
usage_error "--block-cpu: 0.." --block-cpu 4096
usage_error "--block-cpu: 0.." --block-cpu one
usage_error "--size: values" --size 3
usage_error "exceeds ring/4" --lat-size 4M --ring 8M
usage_error "--subs: bad value '9'" --section pattern --subs 9
usage_error "--burst: bad value '0'" --section pattern --burst 0
usage_error "--rate: bad value '-5'" --section pattern --rate -5
usage_error "--prefetch: bad value 'many'" --section pattern --prefetch many
usage_error "at least 16 bytes" --section pattern --size 8

for h in -h --help; do
	timeout 10 "$bench" $h >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 0 ] && grep -q '^usage: crs-bench' "$tmp/out" && [ ! -s "$tmp/err" ] ||
		fail "crs-bench $h: status $rc, or no usage on stdout"
done

# A known scenario is accepted: --list names them all.
timeout 10 "$bench" --list >"$tmp/list" || fail "crs-bench --list failed"
grep -q '^crs-spin-p128 ' "$tmp/list" || fail "--list does not name crs-spin-p128"

# A short wake run: only that section, the others null.
timeout 60 "$bench" --section wake --wake-subs 2 --wakes 2 --rounds 1 --probe 500 --json \
	>"$tmp/wake.json" 2>"$tmp/err" || fail "crs-bench --section wake failed: $(cat "$tmp/err")"
/usr/bin/python3 - "$tmp/wake.json" <<'PY' || status=1
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [k for k in ("throughput", "fanout", "latency", "catchup", "pattern")
       if doc[k] is not None]
if bad:
    print(f"FAIL: sections not run are not null: {bad}")
if not isinstance(doc["wake"], list) or not doc["wake"]:
    print("FAIL: the wake section that ran is empty")
    bad.append("wake")
sys.exit(1 if bad else 0)
PY
# The user's own pattern: 2 subscribers, bursts, processing time; every
# round completes, everything published is delivered to both.
timeout 60 "$bench" --section pattern --size 64 --rate 5000 --burst 5 --work 1000 \
	--prefetch 8 --subs 2 --rounds 2 --window 0.1 --probe 500 --json \
	>"$tmp/pattern.json" 2>"$tmp/err" || fail "crs-bench --section pattern failed: $(cat "$tmp/err")"
/usr/bin/python3 - "$tmp/pattern.json" <<'PY' || status=1
import json, sys
doc = json.load(open(sys.argv[1]))
p = doc["pattern"]
errors = []
if doc["throughput"] is not None:
    errors.append("throughput ran")
want = {"size": 64, "rate": 5000, "burst": 5, "work_ns": 1000, "prefetch": 8,
        "subscribers": 2}
for k, v in want.items():
    if p[k] != v:
        errors.append(f"{k} {p[k]}, not {v}")
if len(p["rounds"]) != 2 or not all(r["ok"] for r in p["rounds"]):
    errors.append(f"rounds {p['rounds']}")
for r in p["rounds"]:
    if r.get("messages", 0) < 5 or r["messages"] % 5:
        errors.append(f"{r.get('messages')} messages: not whole bursts")
    if not 0 < r.get("p50_ns", 0) <= r.get("p99_ns", 0) <= r.get("max_ns", 0):
        errors.append(f"latency percentiles out of order: {r}")
for e in errors:
    print("FAIL: pattern:", e)
sys.exit(1 if errors else 0)
PY

# The kernel's share of a blocking round trip: the raw waits that crs's
# subscriber makes (through a read-only view, in io_uring) run only when
# named, complete every round and every trip, and the table says what
# crs-block-uring costs over raw-uring-defer-ro and raw-uring-ro.
kernel="--section latency --scenario raw-futex-ro --scenario raw-uring
	--scenario raw-uring-ro --scenario raw-uring-defer-ro
	--scenario raw-futex-timed-ro --scenario raw-waitv-ro
	--scenario crs-block-uring
	--lat-size 32
	--rounds 1 --lat-secs 0.05 --trips 500 --probe 500"
timeout 60 "$bench" $kernel >"$tmp/kernel.txt" 2>"$tmp/err" ||
	fail "crs-bench with the raw wait scenarios failed: $(cat "$tmp/err")"
for ref in raw-uring-defer-ro raw-uring-ro; do
	grep -q "crs-block-uring / $ref: p50 [0-9]" "$tmp/kernel.txt" ||
		fail "no crs-block-uring / $ref line in: $(cat "$tmp/kernel.txt")"
done
timeout 60 "$bench" $kernel --json >"$tmp/kernel.json" 2>"$tmp/err" ||
	fail "crs-bench --json with the raw wait scenarios failed: $(cat "$tmp/err")"
/usr/bin/python3 - "$tmp/kernel.json" <<'PY' || status=1
import json, sys
doc = json.load(open(sys.argv[1]))
cells = {c["name"]: c for c in doc["latency"]}
errors = []
for name in ("raw-futex-ro", "raw-uring", "raw-uring-ro",
             "raw-uring-defer-ro", "raw-futex-timed-ro", "raw-waitv-ro",
             "crs-block-uring"):
    c = cells.get(name)
    if not c or not c["ok"] or len(c["rounds"]) != 1 or c["rounds"][0]["trips"] < 1:
        errors.append(f"{name}: {c}")
if "raw-spin" not in cells or "crs-spin" in cells:
    errors.append(f"cells run: {sorted(cells)}")
for e in errors:
    print("FAIL: raw waits:", e)
sys.exit(1 if errors else 0)
PY

# Aeron: without the meson option (CI) its scenarios are skipped, never
# failed: said once in the table, and in the JSON each cell says why and
# has no rounds, no ratio to it appears, and the targets against it say
# "skipped" with the reason and no value. Built with Aeron, they run.
aeron="--section throughput,latency --scenario aeron-excl --scenario aeron-shared
	--scenario aeron-spin --scenario crs-defaults --scenario crs-spin
	--size 32 --lat-size 32 --rounds 1 --window 0.05
	--lat-secs 0.05 --trips 1000 --probe 500"
timeout 80 "$bench" $aeron --json >"$tmp/aeron.json" 2>"$tmp/err" ||
	fail "crs-bench with the Aeron scenarios failed: $(cat "$tmp/err")"
/usr/bin/python3 - "$tmp/aeron.json" <<'PY' || status=1
import json, sys
doc = json.load(open(sys.argv[1]))
cells = doc["throughput"] + doc["latency"]
aeron = [c for c in cells if c["name"].startswith("aeron-")]
others = [c for c in cells if not c["name"].startswith("aeron-")]
errors = []
if sorted(c["name"] for c in aeron) != ["aeron-excl", "aeron-shared", "aeron-spin"]:
    errors.append(f"Aeron cells: {[c['name'] for c in aeron]}")
if not others or any("skipped" in c for c in others):
    errors.append("the baselines did not run")
targets = {t["what"]: t for t in doc["targets"]}
versus = [t for w, t in targets.items() if "aeron-" in w]
if len(versus) != 3:
    errors.append(f"targets against Aeron: {[t['what'] for t in versus]}")
plain = targets.get("spinning ping-pong 32 B: crs-spin p50 / raw-spin p50")
if not plain or plain["verdict"] in ("skipped", "not measured"):
    errors.append(f"crs-spin / raw-spin target: {plain}")
if doc["config"]["aeron"] is None:
    for t in versus:
        if t["verdict"] != "skipped" or not t.get("skipped") or t["value"] is not None:
            errors.append(f"target not skipped: {t}")
    for c in aeron:
        if not c.get("skipped") or c["rounds"]:
            errors.append(f"{c['name']} neither skipped nor run: {c}")
    for c in others:
        if any(k.startswith("ratio_to_aeron") for k in c):
            errors.append(f"{c['name']} has a ratio to a skipped Aeron")
else:
    for c in aeron:
        if "skipped" in c or not all(r["ok"] for r in c["rounds"]) or len(c["rounds"]) != 1:
            errors.append(f"{c['name']} did not run: {c.get('skipped')}")
    for t in versus:
        if t["verdict"] in ("skipped", "not measured") or "skipped" in t:
            errors.append(f"target against Aeron not measured: {t}")
    crs = [c for c in others if c["name"] == "crs-spin-p128"]
    if not crs or "ratio_to_aeron_excl" not in crs[0]:
        errors.append("no crs/Aeron ratio")
if doc["failures"]:
    errors.append(f"{doc['failures']} failures")
for e in errors:
    print("FAIL: aeron:", e)
sys.exit(1 if errors else 0)
PY
# No media driver where AERON_DIR points (any build): skipped, and the
# table says so once per scenario.
AERON_DIR="$tmp/no-driver" timeout 80 "$bench" $aeron >"$tmp/aeron.txt" 2>"$tmp/err" ||
	fail "crs-bench without a media driver failed: $(cat "$tmp/err")"
for s in aeron-excl aeron-shared aeron-spin; do
	[ "$(grep -c "$s .*skipped at every size: " "$tmp/aeron.txt")" -eq 1 ] ||
		fail "the table does not say once that $s was skipped"
done
for w in "crs-defaults / aeron-excl" "crs-spin p50 / aeron-spin p50" "crs-spin p99 / aeron-spin p99"; do
	grep -q "$w .* skipped: " "$tmp/aeron.txt" ||
		fail "the target $w does not say it was skipped"
done

[ "$status" -eq 0 ] && echo "ok: crs-bench argument errors and null sections"
exit "$status"
