#!/bin/sh
# test_top_tui.sh - crs-top's full-screen view, driven in a detached tmux
# session of fixed size: it lists two live streams (made by top_fixture),
# sorts them (n, s), opens a stream's subscribers with Enter (the slow one
# marked as holding back) and goes back with Esc and Backspace, shows the
# help, survives resizes down to a 6x2 terminal, and quits with q, SIGTERM
# and Ctrl-C, each time leaving the shell's terminal sane (canonical mode,
# echo on). Skips (77) when tmux is not installed.
#
# usage: test_top_tui.sh CRS_TOP TOP_FIXTURE
set -eu
top=$1
fixture=$2
if ! command -v tmux >/dev/null 2>&1; then
	echo "tmux not installed: skip"
	exit 77
fi

tmp=$(mktemp -d /tmp/crs-top-tui.XXXXXX)
export CRS_DIR="$tmp/run"
mkdir -m 700 "$CRS_DIR"
sock="$tmp/tmux.sock"
pids=""
cleanup() {
	tmux -S "$sock" kill-server 2>/dev/null || true
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM

tm() { tmux -S "$sock" -f /dev/null "$@"; }
screen() { tm capture-pane -p -t top; }
fail() {
	echo "FAIL: $*" >&2
	echo "--- screen" >&2
	screen >&2 || true
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] || continue
		echo "--- $f" >&2
		tail -n 5 "$f" >&2
	done
	exit 1
}
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
screen_has() { screen | grep -Eq -- "$1"; }
expect() { wait_for 10 screen_has "$1" || fail "the screen never showed /$1/"; }
# Line number of the first screen line matching $1 (0 if none).
line_of() { screen | grep -En -- "$1" | head -n 1 | cut -d: -f1 || true; }
key() { tm send-keys -t top "$@"; }
type_line() {
	tm send-keys -t top -l "$1"
	tm send-keys -t top Enter
}
# The shell's terminal is sane: canonical mode and echo.
check_tty() {
	type_line "stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo tty-$1"
	expect "^icanon echo tty-$1\$"
}

"$fixture" ticks -f -s 10:100:0:0 -T 40 >"$tmp/ticks.out" 2>"$tmp/ticks.err" &
pids="$pids $!"
"$fixture" alpha -f -r 20 -T 40 >"$tmp/alpha.out" 2>"$tmp/alpha.err" &
pids="$pids $!"
wait_for 10 has_line '^ready' ticks.out || fail "ticks not ready"
wait_for 10 has_line '^sub slow' ticks.out || fail "no slow subscriber"
wait_for 10 has_line '^sub fast' ticks.out || fail "no fast subscriber"
wait_for 10 has_line '^ready' alpha.out || fail "alpha not ready"
slow=$(awk '/^sub slow/ { print $3 }' "$tmp/ticks.out")
fast=$(awk '/^sub fast/ { print $3 }' "$tmp/ticks.out")

tm new-session -d -s top -x 100 -y 30 \
	"env -u ENV CRS_DIR='$CRS_DIR' PS1='$ ' sh" ||
	fail "cannot start tmux"
expect '^\$'
type_line "$top -d 0.2; echo top-rc=\$?"

# The list, sorted by name: alpha above ticks.
expect '^NAME +PID +MODE +STATE +MSG/S +BYTES/S +FILL% +DROPS +SUBS +REPLAY'
expect '^alpha +[0-9]+ +publish +live '
expect '^ticks +[0-9]+ +publish +live .* 2 +- *$'
[ "$(line_of '^alpha ')" -lt "$(line_of '^ticks ')" ] ||
	fail "sorted by name, alpha is not above ticks"

# Sort by subscriber count: ticks (2) above alpha (1); back to names.
key s
expect 'sort subs'
[ "$(line_of '^ticks ')" -lt "$(line_of '^alpha ')" ] ||
	fail "sorted by subscribers, ticks is not above alpha"
key n
expect 'sort name'
[ "$(line_of '^alpha ')" -lt "$(line_of '^ticks ')" ] ||
	fail "sorted by name again, alpha is not above ticks"

# Select ticks, show its subscribers: the slow one holds the others back.
key j
key Enter
expect 'stream ticks'
expect '^SLOT +PID +LAG\(MSG\) +LAG\(BYTES\) +DEMAND'
expect "^ +[0-9]+ +$slow .* yes *\$"
expect "^ +[0-9]+ +$fast .* unbounded +unbounded "
screen_has "^ +[0-9]+ +$fast .* yes *\$" && fail "the fast subscriber holds back"
key Escape
expect '^NAME +PID'
key Enter
expect 'stream ticks'
key BSpace
expect '^NAME +PID'

# Help, and any key leaves it.
key h
expect '^Keys'
key x
expect '^NAME +PID'

# Resizes, down to a terminal too small for anything: no crash.
tm resize-window -t top -x 40 -y 10
expect '^crs-top '
tm resize-window -t top -x 6 -y 2
sleep 0.5
key Enter
sleep 0.5
tm resize-window -t top -x 100 -y 30
expect 'stream ticks'
expect "^ +[0-9]+ +$slow .* yes *\$"
key Escape
expect '^NAME +PID'

# q quits with status 0 and leaves a sane terminal.
key q
expect '^top-rc=0$'
check_tty q

# SIGTERM: the terminal is restored, then the signal ends the tool.
type_line "sh -c 'echo \$\$ >$tmp/top.pid; exec $top -d 0.2'; echo term-rc=\$?"
expect '^alpha +[0-9]+ +publish +live '
kill -TERM "$(cat "$tmp/top.pid")"
expect '^term-rc=143$'
check_tty term

# Ctrl-C likewise (SIGINT; the shell drops the rest of a line then).
type_line "$top -d 0.2"
expect '^alpha +[0-9]+ +publish +live '
key C-c
expect '^\$'
type_line "echo int-rc=\$?"
expect '^int-rc=130$'
check_tty int

echo "ok: crs-top interactive view"
