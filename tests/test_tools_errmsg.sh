#!/bin/bash
# test_tools_errmsg.sh CRS_TOP CRS_CAT - the tools print crs_errmsg()'s
# context: which runtime directory is refused and why, who owns a name;
# crs-top exits non-zero when the runtime directory is unusable, and
# ends even when a publisher is stopped with its backlog full.
set -u
top=$1 cat=$2
fails=0
check() { # what, haystack, needle
	if [[ $2 != *"$3"* ]]; then
		echo "FAIL: $1: '$2' lacks '$3'"
		fails=$((fails + 1))
	fi
}

# A shared, world-writable directory: refused, with its mode and why.
out=$(CRS_DIR=/tmp "$top" -b -n 1 2>&1)
rc=$?
[[ $rc -ne 0 ]] || { echo "FAIL: crs-top exited 0 on CRS_DIR=/tmp"; fails=$((fails + 1)); }
check "crs-top on /tmp" "$out" "runtime directory /tmp (from CRS_DIR) is refused"
check "crs-top on /tmp" "$out" "others may write"
out=$(seq 3 | CRS_DIR=/tmp "$cat" -P errmsg 2>&1)
check "crs-cat -P on /tmp" "$out" "mode 1777"
out=$(CRS_DIR=/tmp "$cat" -C errmsg 2>&1)
check "crs-cat -C on /tmp" "$out" "others may write"

# XDG_RUNTIME_DIR pointing nowhere.
out=$(seq 3 | env -u CRS_DIR XDG_RUNTIME_DIR=/nonexistent/run "$cat" -P errmsg 2>&1)
check "crs-cat -P without XDG dir" "$out" "XDG_RUNTIME_DIR=/nonexistent/run"

# A name clash names the owner's pid.
dir=$(mktemp -d /tmp/crs-errmsg-XXXXXX)
trap 'kill $owner 2>/dev/null; rm -rf "$dir"' EXIT
mkfifo "$dir/in"
CRS_DIR=$dir "$cat" -q -P clash <"$dir/in" &
owner=$!
exec 3>"$dir/in"
for _ in $(seq 100); do [[ -e $dir/clash.sock ]] && break; sleep 0.05; done
out=$(echo x | CRS_DIR=$dir "$cat" -P clash 2>&1)
check "crs-cat -P on a taken name" "$out" "already published by pid $owner"
# A directory not created yet is no error for crs-top: no streams.
CRS_DIR=$dir/not-yet "$top" -b -n 1 >/dev/null 2>&1 ||
	{ echo "FAIL: crs-top failed on a missing directory"; fails=$((fails + 1)); }

# A stopped publisher whose listen backlog is full: crs-top still ends,
# its inspection bounded by the timeout from the first syscall on.
kill -STOP $owner
/usr/bin/python3 - "$dir/clash.sock" <<'PY' &
import socket, sys, time
held = []
try:
    while len(held) < 1000:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.setblocking(False)
        s.connect(sys.argv[1])
        held.append(s)
except BlockingIOError:
    pass
pass
time.sleep(60)
PY
filler=$!
for _ in $(seq 100); do
	[[ $(ls /proc/$filler/fd 2>/dev/null | wc -l) -gt 100 ]] && break
	sleep 0.05
done
sleep 0.2
out=$(CRS_DIR=$dir timeout 15 "$top" --json -n 1 2>&1)
rc=$?
[[ -n ${VERBOSE:-} ]] && echo "$out"
[[ $rc -ne 124 ]] || { echo "FAIL: crs-top hung on a stopped publisher"; fails=$((fails + 1)); }
check "crs-top on a stopped publisher" "$out" '"clash"'
# crs-top marks a stream whose publisher does not answer in time.
check "crs-top on a stopped publisher" "$out" '"state":"no-answer"'
kill $filler
kill -CONT $owner
exec 3>&-
wait $owner

[[ $fails -eq 0 ]] && echo "all tool error messages as expected"
exit $((fails > 0))
