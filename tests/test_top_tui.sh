#!/bin/sh
# test_top_tui.sh - crs-top's full-screen view, driven in a detached tmux
# session of fixed size: it lists live streams (made by top_fixture),
# sorts them (n, s), opens a stream's subscribers with Enter (the slow one
# marked as holding back, each with its command name) and goes back with
# Esc and Backspace, shows the help, survives resizes down to a 6x2
# terminal, and quits with q, SIGTERM and Ctrl-C, each time leaving the
# shell's terminal sane (canonical mode, echo on). At 80x24 and 120x30,
# with a SIGSTOPped publisher present from the start (its handshake never
# answers): the screen is drawn and answers keys at once (checked by
# content after a short bounded wait), the stopped stream is marked
# no-answer, a publisher stopped later is marked stopped, a 61-character
# name is elided in the middle, numbers and the holding-back marker stay
# whole, and a dead stream is pruned with x. Skips (77) when tmux is not
# installed.
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
# session COLS LINES: a shell in a fresh tmux server of that size. A new
# server on this machine now and then exits at once (before it logs
# anything): try again a few times.
session() {
	for try in 1 2 3 4 5; do
		tm kill-server 2>/dev/null || true
		tm new-session -d -s top -x "$1" -y "$2" \
			"env -u ENV CRS_DIR='$CRS_DIR' PS1='$ ' sh" 2>/dev/null &&
			tm has-session -t top 2>/dev/null && return 0
		sleep 0.2
	done
	fail "cannot start tmux"
}
type_line() {
	tm send-keys -t top -l "$1"
	tm send-keys -t top Enter
}
# The shell's terminal is sane: canonical mode and echo.
check_tty() {
	type_line "stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo tty-$1"
	expect "^icanon echo tty-$1\$"
}

"$fixture" ticks -f -s 10:100:0:0 -T 60 >"$tmp/ticks.out" 2>"$tmp/ticks.err" &
pids="$pids $!"
"$fixture" alpha -f -r 20 -T 60 >"$tmp/alpha.out" 2>"$tmp/alpha.err" &
pids="$pids $!"
long=a-stream-name-of-sixty-one-characters-that-would-push-columns
"$fixture" "$long" -f -r 20 -T 60 >"$tmp/long.out" 2>"$tmp/long.err" &
pids="$pids $!"
"$fixture" frozen -f -r 20 -T 60 >"$tmp/frozen.out" 2>"$tmp/frozen.err" &
pids="$pids $!"
wait_for 10 has_line '^ready' ticks.out || fail "ticks not ready"
wait_for 10 has_line '^sub slow' ticks.out || fail "no slow subscriber"
wait_for 10 has_line '^sub fast' ticks.out || fail "no fast subscriber"
wait_for 10 has_line '^ready' alpha.out || fail "alpha not ready"
wait_for 10 has_line '^ready' long.out || fail "long not ready"
wait_for 10 has_line '^ready' frozen.out || fail "frozen not ready"
slow=$(awk '/^sub slow/ { print $3 }' "$tmp/ticks.out")
fast=$(awk '/^sub fast/ { print $3 }' "$tmp/ticks.out")
ticks=$(awk '/^ready/ { print $2 }' "$tmp/ticks.out")
frozen=$(awk '/^ready/ { print $2 }' "$tmp/frozen.out")
# A stopped publisher: its socket accepts, but nobody answers.
kill -STOP "$frozen"

# A narrow screen first: 80x24, as terminals start.
session 80 24
expect '^\$'
type_line "$top -d 0.2; echo top-rc=\$?"
# Drawn, stalled stream and all, within a short bounded wait (a frozen
# handshake used to blank the screen for seconds per stream).
wait_for 2 screen_has '^alpha +[0-9]+ +(publish +)?live ' ||
	fail "80x24: the screen was not drawn within 2 s"
expect '^frozen +- +(- +)?no-answer'
# Every column a number needs is there whole; the holder is named.
expect '^NAME +PID +(MODE +)?STATE +MSG/S +.*SUBS +REPLAY +HELD-BY *$'
expect "^ticks +$ticks +(publish +)?(live|idle|stalled) "
expect '^a-str[a-z-]*~[a-z-]*s +[0-9]+ '
screen | awk 'length($0) > 80 { bad = 1 } END { exit bad }' ||
	fail "80x24: a line is wider than the screen"
# Keys are answered while the frozen publisher is there.
key s
expect 'sort subs'
key n
expect 'sort name'
# The subscribers at 80 columns: command names, the holding marker whole.
line=$(line_of '^ticks ')
first=$(line_of '^a-stream')
steps=$((line - first))
i=0
while [ "$i" -lt "$steps" ]; do key j; i=$((i + 1)); done
key Enter
expect 'stream ticks'
expect "^pid $ticks top_fixture "
expect 'HOLDING *$'
expect "$slow +top_fixture .* yes *\$"
expect "$fast +top_fixture "
key Escape
expect '^NAME +PID'
# A publisher stopped after it was opened: marked stopped.
kill -STOP "$(awk '/^ready/ { print $2 }' "$tmp/alpha.out")"
expect '^alpha +[0-9]+ +(publish +)?stopped '
kill -CONT "$(awk '/^ready/ { print $2 }' "$tmp/alpha.out")"
expect '^alpha +[0-9]+ +(publish +)?live '
key q
expect '^top-rc=0$'

# The same at 120x30, wide enough for everything.
session 120 30
expect '^\$'
type_line "$top -d 0.2; echo top-rc=\$?"
wait_for 2 screen_has '^alpha +[0-9]+ ' ||
	fail "120x30: the screen was not drawn within 2 s"
expect '^NAME +PID +MODE +STATE +MSG/S +BYTES/S +FILL% +DROPS +SUBS +REPLAY +HELD-BY *$'
expect '^a-stream-name-of-sixty[a-z-]*~[a-z-]*-columns +[0-9]+ +publish '
expect '^frozen +- +- +no-answer'
expect '^alpha +[0-9]+ +publish +live '
expect "^ticks +$ticks +publish +(live|idle|stalled) .* 2 +- +([0-9]+|-) *\$"
[ "$(line_of '^alpha ')" -lt "$(line_of '^ticks ')" ] ||
	fail "sorted by name, alpha is not above ticks"

# A dead stream is shown dead; x prunes it.
"$fixture" doomed -f -T 60 >"$tmp/doomed.out" 2>"$tmp/doomed.err" &
doomed=$!
pids="$pids $doomed"
wait_for 10 has_line '^ready' doomed.out || fail "doomed not ready"
expect '^doomed +[0-9]+ +publish '
kill -KILL "$doomed"
expect '^doomed +[0-9]+ +publish +dead '
key x
wait_for 10 sh -c "! tmux -S '$sock' capture-pane -p -t top | grep -q '^doomed '" ||
	fail "x did not prune the dead stream"
expect '^alpha +[0-9]+ +publish +live '

# Sort by subscriber count: ticks (2) above alpha (1); back to names.
key s
expect 'sort subs'
[ "$(line_of '^ticks ')" -lt "$(line_of '^alpha ')" ] ||
	fail "sorted by subscribers, ticks is not above alpha"
key n
expect 'sort name'
[ "$(line_of '^alpha ')" -lt "$(line_of '^ticks ')" ] ||
	fail "sorted by name again, alpha is not above ticks"

# Select ticks (the last by name), show its subscribers: the slow one
# holds the others back.
key G
key Enter
expect 'stream ticks'
expect '^SLOT +PID +COMMAND +STATE +LAG\(MSG\) +LAG\(BYTES\) +DEMAND'
expect "^ +[0-9]+ +$slow +top_fixture .* yes *\$"
expect "^ +[0-9]+ +$fast +top_fixture .* unbounded +unbounded "
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
tm resize-window -t top -x 120 -y 30
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
