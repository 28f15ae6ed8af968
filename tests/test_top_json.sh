#!/bin/sh
# test_top_json.sh - crs-top's batch outputs (--json and -b) against live
# streams with known figures, made by top_fixture:
#   ticks: a fast subscriber (unbounded demand) and a slow one that asks
#          for 10 messages every 100 ms up to 100 and reads only the first
#          10, so the publisher is held back at exactly 100 messages;
#   beta:  a stream that closes while crs-top watches;
#   story: a replay stream that published 50 messages and retains 20.
# Checks: the observer is not counted as a subscriber; cumulative counters
# exactly; rates against the counters (exactly) and against the fixture's
# own clock (loosely, a factor of 3); the slow subscriber's lag, demand and
# holding back; replay depth; the text output; a closed stream; a publisher
# killed with SIGKILL shown as dead to a crs-top that watched it die and to
# one started afterwards; a new publisher taking the dead one's name (the
# watcher re-opens it); four SIGSTOPped publishers, whose handshakes never
# answer, shown as no-answer by a crs-top -n 1 that does not wait for them
# one after another (a 10 s guard: serially they took 2 s each); the
# activity (stalled, idle), command names and consumed-since-joined of
# the held-back stream; usage errors.
#
# usage: test_top_json.sh CRS_TOP TOP_FIXTURE
set -eu
top=$1
fixture=$2
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }

tmp=$(mktemp -d /tmp/crs-top-json.XXXXXX)
export CRS_DIR="$tmp/run"
mkdir -m 700 "$CRS_DIR"
pids=""
cleanup() {
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM

fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] || continue
		echo "--- $f" >&2
		tail -n 5 "$f" | cut -c1-2000 >&2
	done
	exit 1
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
	tries=$(($1 * 20))
	shift
	until "$@"; do
		tries=$((tries - 1))
		[ "$tries" -gt 0 ] || return 1
		sleep 0.05
	done
}
has_line() { grep -q "$1" "$tmp/$2" 2>/dev/null; }
lines_at_least() { [ -s "$tmp/$2" ] && [ "$(wc -l <"$tmp/$2")" -ge "$1" ]; }
last_has() { tail -n 1 "$tmp/$2" 2>/dev/null | grep -q "$1"; }

# -- usage errors exit 2 ---------------------------------------------------
for bad in "-d abc" "-d 0" "-n 0" "-o bogus" "-x" "extra"; do
	rc=0
	# shellcheck disable=SC2086 # split on purpose
	"$top" $bad >/dev/null 2>&1 || rc=$?
	[ "$rc" -eq 2 ] || fail "crs-top $bad exited $rc, not 2"
done
"$top" -h | grep -q -- '--json' || fail "crs-top -h does not describe --json"

# -- an empty runtime directory ---------------------------------------------
"$top" --json -n 1 -d 0.05 >"$tmp/empty.out" 2>"$tmp/empty.err" ||
	fail "crs-top on an empty directory failed"
grep -q '"streams":\[\]' "$tmp/empty.out" || fail "empty directory not empty"

# -- the streams ---------------------------------------------------------------
"$fixture" ticks -m 64 -f -s 10:100:100:10 -g -T 40 \
	>"$tmp/fixture.out" 2>"$tmp/fixture.err" &
fix=$!
pids="$pids $fix"
"$fixture" beta -m 16 -f -r 50 -T 40 >"$tmp/beta.out" 2>"$tmp/beta.err" &
beta=$!
pids="$pids $beta"
wait_for 10 has_line '^ready' fixture.out || fail "ticks not ready"
wait_for 10 has_line '^sub slow' fixture.out || fail "no slow subscriber"
wait_for 10 has_line '^sub fast' fixture.out || fail "no fast subscriber"
wait_for 10 has_line '^ready' beta.out || fail "beta not ready"
"$fixture" story -m 32 -N 50 -R 20 -f -T 40 >"$tmp/story.out" 2>"$tmp/story.err" &
pids="$pids $!"
wait_for 10 has_line '^published 50' story.out || fail "story not published"
slow=$(awk '/^sub slow/ { print $3 }' "$tmp/fixture.out")
fast=$(awk '/^sub fast/ { print $3 }' "$tmp/fixture.out")

# A crs-top that watches everything from before the first message on.
"$top" --json -d 0.2 >"$tmp/live.out" 2>"$tmp/live.err" &
live=$!
pids="$pids $live"
wait_for 10 lines_at_least 2 live.out || fail "no JSON from crs-top"
kill -USR1 "$fix"
wait_for 20 has_line '^slow done' fixture.out || fail "slow subscriber stuck"
wait_for 10 last_has '"name":"ticks","state":"live"[^]]*"published":100,' \
	live.out || fail "crs-top never saw the 100 messages"

# Steady state: the publisher is held back by the slow subscriber.
"$top" --json -n 2 -d 0.2 >"$tmp/steady.out" 2>"$tmp/steady.err" ||
	fail "crs-top --json -n 2 failed"
"$top" -b -n 1 -d 0.1 >"$tmp/text.out" 2>"$tmp/text.err" ||
	fail "crs-top -b -n 1 failed"

# Four stopped publishers: one crs-top run still reports at once, marking
# them, with the live streams' figures beside them.
frozen_pids=""
for k in 1 2 3 4; do
	"$fixture" "frozen$k" -f -T 40 >"$tmp/frozen$k.out" 2>"$tmp/frozen$k.err" &
	pids="$pids $!"
	wait_for 10 has_line '^ready' "frozen$k.out" || fail "frozen$k not ready"
	frozen_pids="$frozen_pids $(awk '/^ready/ { print $2 }' "$tmp/frozen$k.out")"
done
# shellcheck disable=SC2086 # a list of pids
kill -STOP $frozen_pids
timeout 10 "$top" --json -n 1 -d 0.3 >"$tmp/frozen.out" 2>"$tmp/frozen.err" ||
	fail "crs-top --json -n 1 with four stopped publishers did not finish in 10 s"
timeout 10 "$top" -b -n 1 -d 0.3 >"$tmp/frozen_text.out" 2>"$tmp/frozen_text.err" ||
	fail "crs-top -b -n 1 with four stopped publishers did not finish in 10 s"
# shellcheck disable=SC2086
kill -KILL $frozen_pids

# beta closes; ticks dies.
kill -TERM "$beta"
kill -KILL "$fix"
wait_for 10 last_has '"name":"ticks","state":"dead"' live.out ||
	fail "the watching crs-top did not see ticks die"
"$top" --json -n 1 -d 0.1 >"$tmp/fresh.out" 2>"$tmp/fresh.err" ||
	fail "crs-top on a dead stream failed"
"$top" -b -n 1 -d 0.1 >"$tmp/fresh_text.out" 2>"$tmp/fresh_text.err" ||
	fail "crs-top -b on a dead stream failed"

# A new publisher takes the dead one's name: the watcher follows it.
"$fixture" ticks -m 64 -N 5 -f -T 40 >"$tmp/ticks2.out" 2>"$tmp/ticks2.err" &
pids="$pids $!"
wait_for 10 has_line '^published 5' ticks2.out || fail "new ticks not ready"
new=$(awk '/^ready/ { print $2 }' "$tmp/ticks2.out")
wait_for 10 last_has "\"name\":\"ticks\",\"state\":\"live\",[^]]*\"pid\":$new,[^]]*\"published\":5," \
	live.out || fail "the watching crs-top did not follow the new ticks"
kill -TERM "$live"
wait "$live" 2>/dev/null || true

for f in empty live steady text fresh fresh_text frozen frozen_text; do
	[ ! -s "$tmp/$f.err" ] || fail "crs-top wrote to stderr ($f.err)"
done

python3 - "$tmp" "$slow" "$fast" <<'PY' || fail "checks failed"
import json, sys

tmp, slow, fast = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SIZE, TOTAL, CONSUME = 64, 100, 10
errors = []

def check(cond, what):
    if not cond:
        errors.append(what)
    return cond

def load(name):
    with open(f"{tmp}/{name}") as f:
        return [json.loads(line) for line in f]

def find(doc, name):
    got = [s for s in doc["streams"] if s["name"] == name]
    return got[0] if got else None

KEYS = ["name", "state", "gone", "error", "pid", "mode", "ring_size",
        "ring_used", "ring_fill", "max_message", "published", "bytes",
        "dropped", "msgs_per_s", "bytes_per_s", "subscriber_count", "wakes",
        "no_demand", "no_room", "evicted", "refused", "epoch", "retained",
        "retained_bytes", "retained_age_ns", "end_code", "end_message",
        "sampled_ns", "subscribers"]
SUB_KEYS = ["slot", "pid", "requested", "outstanding", "consumed",
            "lag_messages", "lag_bytes", "wakeups", "paced",
            "wakeups_per_s", "holding_back"]

live = load("live.out")
check(len(live) >= 5, f"only {len(live)} documents from the watching crs-top")
for doc in live:
    for k in ("time", "dir", "interval_s", "streams"):
        check(k in doc, f"document without {k}")
    for s in doc["streams"]:
        check(all(k in s for k in KEYS), f"stream keys: {sorted(s)}")
        for sub in s["subscribers"]:
            check(all(k in sub for k in SUB_KEYS), f"sub keys: {sorted(sub)}")

# Before the first message: two subscribers, the observer is not one.
first = find(live[0], "ticks")
if check(first is not None, "ticks missing from the first document"):
    check(first["state"] == "live", f"first state {first['state']}")
    check(first["published"] == 0, "published before the go")
    check(first["mode"] == "publish", f"mode {first['mode']}")
    check(first["subscriber_count"] == 2 and len(first["subscribers"]) == 2,
          f"{first['subscriber_count']} subscribers: the observer counted?")
    check({s["pid"] for s in first["subscribers"]} == {slow, fast},
          "subscriber pids")

# Rates: exactly the counters' deltas over sampled_ns; loosely the pace.
prev, peak, rated = None, 0.0, 0
for doc in live:
    s = find(doc, "ticks")
    if s is None or s["state"] != "live":
        prev = None
        continue
    if prev is not None and check(s["msgs_per_s"] is not None,
                                  "no rate for a stream seen before"):
        dt = (s["sampled_ns"] - prev["sampled_ns"]) / 1e9
        want = (s["published"] - prev["published"]) / dt
        wantb = (s["bytes"] - prev["bytes"]) / dt
        check(abs(s["msgs_per_s"] - want) <= 0.01 * want + 0.01,
              f"msgs_per_s {s['msgs_per_s']} but counters say {want}")
        check(abs(s["bytes_per_s"] - wantb) <= 0.01 * wantb + 0.01,
              f"bytes_per_s {s['bytes_per_s']} but counters say {wantb}")
        check(abs(s["bytes_per_s"] - SIZE * s["msgs_per_s"])
              <= 0.01 * s["bytes_per_s"] + 0.1, "bytes/s is not 64 x msgs/s")
        peak = max(peak, s["msgs_per_s"])
        rated += 1
    prev = s
check(rated >= 3, f"only {rated} rated samples")
with open(f"{tmp}/fixture.out") as f:
    done = [l.split() for l in f if l.startswith("slow done")][0]
mean = (TOTAL - 10) / float(done[4])  # the first batch came at once
check(mean / 3 <= peak <= mean * 3,
      f"peak rate {peak:.1f}/s against the fixture's {mean:.1f}/s")

# Steady state, from a crs-top started afterwards.
steady = load("steady.out")
s = find(steady[-1], "ticks")
if check(s is not None, "ticks missing from the steady documents"):
    check(s["state"] == "live", f"steady state {s['state']}")
    check(s["published"] == TOTAL, f"published {s['published']}")
    check(s["bytes"] == TOTAL * SIZE, f"bytes {s['bytes']}")
    check(s["msgs_per_s"] == 0, f"held back, yet {s['msgs_per_s']} msg/s")
    check(s["activity"] == "stalled", f"held back, yet {s['activity']}")
    check(s["command"] == "top_fixture", f"publisher command {s['command']}")
    check(s["no_demand"] > 0, "held back, yet no claim was refused")
    check(s["subscriber_count"] == 2, f"{s['subscriber_count']} subscribers")
    subs = {x["pid"]: x for x in s["subscribers"]}
    if check(set(subs) == {slow, fast}, f"subscriber pids {sorted(subs)}"):
        sl, fa = subs[slow], subs[fast]
        check(sl["requested"] == TOTAL, f"slow requested {sl['requested']}")
        check(sl["outstanding"] == 0, f"slow outstanding {sl['outstanding']}")
        check(sl["consumed"] == CONSUME, f"slow consumed {sl['consumed']}")
        check(sl["lag_messages"] == TOTAL - CONSUME,
              f"slow lag {sl['lag_messages']}")
        lag = TOTAL - CONSUME
        check(lag * SIZE <= sl["lag_bytes"] <= lag * (SIZE + 64),
              f"slow lag_bytes {sl['lag_bytes']}")
        check(sl["holding_back"] is True, "slow is not holding back")
        check(sl["activity"] == "stalled",
              f"slow reads nothing of its lag, yet {sl['activity']}")
        check(fa["activity"] == "idle", f"fast is caught up, yet {fa['activity']}")
        check(sl["command"] == "top_fixture" and fa["command"] == "top_fixture",
              f"commands {sl['command']}, {fa['command']}")
        check(sl["joined"] == 0 and sl["consumed"] - sl["joined"] == CONSUME,
              f"slow joined {sl['joined']}")
        check(fa["requested"] == "unbounded", f"fast {fa['requested']}")
        check(fa["outstanding"] == "unbounded", f"fast {fa['outstanding']}")
        check(fa["consumed"] == TOTAL and fa["lag_messages"] == 0,
              f"fast consumed {fa['consumed']} lag {fa['lag_messages']}")
        check(fa["holding_back"] is False, "fast marked as holding back")
        check(s["ring_used"] == sl["lag_bytes"],
              f"ring_used {s['ring_used']} is not the slowest's lag")
        check(abs(s["ring_fill"] - s["ring_used"] / s["ring_size"]) < 1e-5,
              "ring_fill")
        check(sl["wakeups_per_s"] is not None, "no wakeup rate")

# Replay depth: the last 20 of 50 messages of 32 bytes are retained.
s = find(steady[-1], "story")
if check(s is not None, "story missing"):
    check(s["mode"] == "replay", f"story mode {s['mode']}")
    check(s["published"] == 50, f"story published {s['published']}")
    check(s["retained"] == 20, f"story retained {s['retained']}")
    check(s["retained_bytes"] == 20 * 32,
          f"story retained_bytes {s['retained_bytes']}")
s = find(steady[-1], "ticks")
check(s is not None and s["mode"] == "publish" and s["retained"] == 0,
      "a publish stream retains nothing")

# The text output says the same.
with open(f"{tmp}/text.out") as f:
    rows = [l.split() for l in f]
row = [r for r in rows if r and r[0] == "ticks"]
check(row and row[0][3] == "stalled" and row[0][8] == "2" and row[0][9] == "-"
      and row[0][10] == str(slow), f"text row {row}")
row = [r for r in rows if r and r[0] == "story"]
check(row and row[0][2] == "replay" and row[0][9] == "20", f"text row {row}")
sub = [r for r in rows if len(r) >= 2 and r[1] == str(slow)]
check(sub and sub[0][2] == "top_fixture" and sub[0][3] == "stalled"
      and sub[0][4] == str(TOTAL - CONSUME) and sub[0][6] == "0"
      and sub[0][7] == str(TOTAL) and sub[0][8] == str(CONSUME)
      and sub[0][-1] == "yes", f"text slow row {sub}")
sub = [r for r in rows if len(r) >= 2 and r[1] == str(fast)]
check(sub and sub[0][6] == "unbounded" and sub[0][-1] != "yes",
      f"text fast row {sub}")

# Stopped publishers: marked, and the others still read.
doc = load("frozen.out")[0]
for k in range(1, 5):
    f = find(doc, f"frozen{k}")
    check(f is not None and f["state"] == "no-answer",
          f"frozen{k}: {f and f['state']}")
s = find(doc, "ticks")
check(s is not None and s["published"] == TOTAL, "ticks unread beside frozen ones")
with open(f"{tmp}/frozen_text.out") as f:
    rows = [l.split() for l in f]
check(sum(1 for r in rows if r[:1] and r[0].startswith("frozen")
          and r[3] == "no-answer") == 4, "text: frozen streams not no-answer")

# beta closed: shown once as closed, then forgotten.
closed = [find(d, "beta") for d in live]
check(any(b and b["state"] == "closed" for b in closed),
      f"beta never closed: {[b and b['state'] for b in closed]}")
check(closed[-1] is None, "beta still listed after it went away")

# ticks died: the watcher keeps the last figures, a new crs-top has none.
states = [find(d, "ticks") for d in live]
dead = [i for i, s in enumerate(states) if s and s["state"] == "dead"]
if check(dead, "the watcher never showed ticks dead"):
    last = states[dead[0]]
    check(last["published"] == TOTAL, "last figures lost")
    check(last["subscribers"] == [], "a dead stream lists subscribers")
    # Then the new publisher of the same name, read afresh.
    new = [s for s in states[dead[-1] + 1:] if s and s["state"] == "live"]
    if check(new, "the watcher never showed the new ticks"):
        check(new[0]["pid"] != last["pid"], "same pid after the new ticks")
        check(new[0]["msgs_per_s"] is None,
              "a rate across two different streams")
        check(new[-1]["published"] == 5 and new[-1]["subscriber_count"] == 1,
              f"new ticks: {new[-1]['published']} published")
fresh = find(load("fresh.out")[0], "ticks")
check(fresh is not None and fresh["state"] == "dead",
      f"fresh crs-top: {fresh and fresh['state']}")
with open(f"{tmp}/fresh_text.out") as f:
    rows = [l.split() for l in f]
check(any(r[:1] == ["ticks"] and r[3] == "dead" for r in rows),
      "text output does not show ticks dead")

for e in errors:
    print("check failed:", e)
sys.exit(1 if errors else 0)
PY
echo "ok: crs-top --json and -b"
