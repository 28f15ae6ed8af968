#!/usr/bin/env bash
# test_cat.sh - crs-cat end to end, publisher and subscribers as separate
# processes: 100 MiB of random bytes in -b mode and a million lines in line
# mode compared byte for byte, delimiters, small wrapping rings, several
# subscribers in lockstep, a publisher holding input for a late subscriber
# and admitting subscribers while stdin is idle, -c, -W, -t, EPIPE on
# stdout, signals, and the exit codes (2 for usage errors, 1 for stream
# errors with one line naming the stream); replay streams (-R,
# --replay-bytes, --replay-age) and late subscribers, -a (autoConnect),
# --overflow drop|error|latest and --on-disconnect; the name as a trailing
# operand and names that look like options, --linger, --untethered,
# --allow-uid/--allow-group/--allow-any (as user nobody, when root), -F
# across three publishers, -e, -f, the lockstep publisher's waiting
# notice, and usage errors that name the option at fault. Each run has
# its own CRS_DIR. No assertion depends on timing.
#
# usage: test_cat.sh CRS_CAT        (prints "N passed, N failed")
set -u
CAT=${1:?usage: test_cat.sh CRS_CAT}
tmp=$(mktemp -d "${CRS_TEST_TMP:-${TMPDIR:-/tmp}}/crs-cat.XXXXXX") || exit 1
export CRS_DIR=$tmp/run
T="timeout -k 5 60" # no hang outlives a minute
passed=0 failed=0
bg_pids=()

cleanup() {
	exec 7>&-
	for p in "${bg_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# report STATUS DESCRIPTION [FILE...]: FILEs (stderr logs) shown on failure.
report() {
	local st=$1 desc=$2
	shift 2
	if [ "$st" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok   - $desc"
	else
		failed=$((failed + 1))
		echo "FAIL - $desc"
		for f in "$@"; do [ -s "$f" ] && sed 's/^/       | /' "$f"; done
	fi
}

# one_line FILE PATTERN: FILE is exactly one line and matches PATTERN.
one_line() { [ "$(wc -l <"$1")" -eq 1 ] && grep -q -- "$2" "$1"; }

# Wait up to 10 s for FILE to be non-empty.
await_output() {
	local i
	for i in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	return 1
}

# Wait up to 10 s for FILE to hold at least N lines.
await_lines() {
	local i
	for i in $(seq 200); do
		[ -s "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

test_binary_100m() {
	head -c 100M /dev/urandom >"$tmp/in.bin"
	local t0 pub prc crc
	t0=$(now_ms)
	cat "$tmp/in.bin" | $T "$CAT" -q -P bin -w 1 -b 64K 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C bin -b >"$tmp/out.bin" 2>"$tmp/sub.err"
	crc=$?
	wait $pub
	prc=$?
	local ms=$(($(now_ms) - t0))
	[ $prc -eq 0 ] && [ $crc -eq 0 ] && cmp -s "$tmp/in.bin" "$tmp/out.bin"
	report $? "100 MiB of random bytes through -b 64K, byte for byte ($ms ms; publisher $prc, consumer $crc)" \
		"$tmp/pub.err" "$tmp/sub.err"
	rm -f "$tmp/in.bin" "$tmp/out.bin"
}

test_lines_1m() {
	seq 1 1000000 >"$tmp/in.txt"
	local t0 pub prc crc
	t0=$(now_ms)
	$T "$CAT" -q -P lines -w 1 <"$tmp/in.txt" 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C lines 2>"$tmp/sub.err" | cat >"$tmp/out.txt"
	crc=${PIPESTATUS[0]}
	wait $pub
	prc=$?
	local ms=$(($(now_ms) - t0))
	[ $prc -eq 0 ] && [ $crc -eq 0 ] && cmp -s "$tmp/in.txt" "$tmp/out.txt"
	report $? "1,000,000 lines in line mode, byte for byte ($ms ms; publisher $prc, consumer $crc)" \
		"$tmp/pub.err" "$tmp/sub.err"
	rm -f "$tmp/in.txt" "$tmp/out.txt"
}

# pass_through NAME EXPECTED PUB_ARGS SUB_ARGS: printf input is read from
# $tmp/in; the consumer's output must equal EXPECTED (a printf format).
pass_through() {
	local name=$1 want=$2 pub prc crc
	$T "$CAT" -q -P "$name" -w 1 $3 <"$tmp/in" 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C "$name" $4 >"$tmp/out" 2>"$tmp/sub.err"
	crc=$?
	wait $pub
	prc=$?
	printf "$want" >"$tmp/want"
	[ $prc -eq 0 ] && [ $crc -eq 0 ] && cmp -s "$tmp/want" "$tmp/out"
}

test_delimiters() {
	printf 'a\n\nb' >"$tmp/in"
	pass_through empty 'a\n\nb\n' "" ""
	report $? "empty lines are messages, so is a last line without newline" "$tmp/pub.err" "$tmp/sub.err"
	printf 'x\0\0y z\0' >"$tmp/in"
	pass_through nul 'x\t\ty z\t' "-d \\0" "-d \\t"
	report $? "-d '\\0' splits the input, -d '\\t' follows each message" "$tmp/pub.err" "$tmp/sub.err"
	printf '0123456789' >"$tmp/in"
	pass_through chunks '0123|4567|89|' "-b 4" "-d |"
	report $? "-b 4 publishes 4-byte chunks, the last shorter" "$tmp/pub.err" "$tmp/sub.err"
	: >"$tmp/in"
	pass_through none '' "" ""
	report $? "empty input completes the stream with no message" "$tmp/pub.err" "$tmp/sub.err"
}

# No subscriber, no demand: the publisher holds its input (it drops
# nothing) until one comes; with nothing to hold, it completes at once.
# hold_case INPUT WANT PUB_ARGS SUB_ARGS (printf formats for INPUT, WANT)
hold_case() {
	local pub prc rc
	printf "$1" | $T "$CAT" -q -P hold $3 2>"$tmp/pub.err" &
	pub=$!
	sleep 0.3
	$T "$CAT" -q -C hold $4 >"$tmp/out" 2>"$tmp/sub.err"
	rc=$?
	wait $pub
	prc=$?
	printf "$2" >"$tmp/want"
	[ $rc -eq 0 ] && [ $prc -eq 0 ] && cmp -s "$tmp/want" "$tmp/out"
	report $? "without -w the publisher holds its input for a late subscriber (${3:-lines})" \
		"$tmp/pub.err" "$tmp/sub.err"
}

test_no_subscriber() {
	local rc1 rc2
	hold_case 'a\nb\n' 'a\nb\n' "" ""
	hold_case 'abc' 'a|b|c|' "-b 1" "-d |"
	timeout -k 1 5 "$CAT" -q -P alone </dev/null
	rc1=$?
	timeout -k 1 5 "$CAT" -q -P alone -b 4K </dev/null
	rc2=$?
	[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]
	report $? "empty input with no subscriber completes at once (lines $rc1, -b $rc2)"
}

# Small rings: chunks as large as the ring allows (a quarter), so frames
# wrap with padding; the input an exact multiple of the chunk, so the
# last claim (at end of input) wraps and is then given up.
test_small_ring() {
	local n pub prc rc
	for n in 3 7 16; do
		head -c $((n * 1024)) /dev/urandom >"$tmp/in.bin"
		timeout -k 1 10 "$CAT" -q -P wrap -w 1 -t 2 -r 4K -b 1K <"$tmp/in.bin" 2>"$tmp/pub.err" &
		pub=$!
		timeout -k 1 10 "$CAT" -q -W -C wrap -b >"$tmp/out.bin" 2>"$tmp/sub.err"
		rc=$?
		wait $pub
		prc=$?
		[ $rc -eq 0 ] && [ $prc -eq 0 ] && [ ! -s "$tmp/pub.err" ] && cmp -s "$tmp/in.bin" "$tmp/out.bin"
		report $? "-r 4K -b 1K, $n KiB of input: everything, then the end (publisher $prc, consumer $rc)" \
			"$tmp/pub.err" "$tmp/sub.err"
	done
}

# Lockstep: three subscribers with different prefetches all get it all.
test_three_subscribers() {
	seq 1 20000 >"$tmp/in.txt"
	local pub prc i ok=0 p s=()
	$T "$CAT" -q -P three -w 3 <"$tmp/in.txt" 2>"$tmp/pub.err" &
	pub=$!
	for p in 1 3 128; do
		$T "$CAT" -q -W -C three -p $p >"$tmp/out.$p" 2>>"$tmp/sub.err" &
		s+=($!)
	done
	for i in "${s[@]}"; do wait "$i" || ok=1; done
	wait $pub || ok=1
	for p in 1 3 128; do cmp -s "$tmp/in.txt" "$tmp/out.$p" || ok=1; done
	report $ok "-w 3: three subscribers (-p 1, 3, 128) each receive all 20000 lines" \
		"$tmp/pub.err" "$tmp/sub.err"
	rm -f "$tmp"/out.* "$tmp/sub.err"
}

# -c 10 exits 0 after ten messages; its leaving releases the others.
test_take() {
	seq 1 100 >"$tmp/in.txt"
	local pub prc a arc brc
	$T "$CAT" -q -P take -w 2 <"$tmp/in.txt" 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C take -c 10 >"$tmp/a" 2>"$tmp/a.err" &
	a=$!
	$T "$CAT" -q -W -C take >"$tmp/b" 2>"$tmp/b.err"
	brc=$?
	wait $a
	arc=$?
	wait $pub
	prc=$?
	[ $arc -eq 0 ] && cmp -s "$tmp/a" <(seq 1 10) && [ ! -s "$tmp/a.err" ]
	report $? "-c 10 writes ten messages and exits 0 (status $arc)" "$tmp/a.err"
	[ $brc -eq 0 ] && [ $prc -eq 0 ] && cmp -s "$tmp/b" "$tmp/in.txt"
	report $? "after -c 10 left, the other subscriber gets all 100 and the publisher completes" \
		"$tmp/b.err" "$tmp/pub.err"
}

test_wait_stream() {
	local sub t0 ms rc alive=1
	$T "$CAT" -q -W -C late >"$tmp/out" 2>"$tmp/sub.err" &
	sub=$!
	sleep 0.5
	kill -0 $sub 2>/dev/null && alive=0
	printf 'x\ny\n' | $T "$CAT" -q -P late 2>"$tmp/pub.err"
	wait $sub
	rc=$?
	[ $alive -eq 0 ] && [ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = "$(printf 'x\ny')" ]
	report $? "-W waits for the stream to appear, then copies it (status $rc)" \
		"$tmp/sub.err" "$tmp/pub.err"

	t0=$(now_ms)
	$T "$CAT" -C nosuch >"$tmp/out" 2>"$tmp/err"
	rc=$?
	ms=$(($(now_ms) - t0))
	[ $rc -eq 1 ] && [ $ms -lt 3000 ] && one_line "$tmp/err" "stream 'nosuch'.*no such stream"
	report $? "a missing stream exits 1 at once ($ms ms) with one line naming it" "$tmp/err"
}

# A publisher on a fifo, fed through fd 7 (children other than the
# publisher must not hold fd 7, or the fifo never reaches EOF). The
# output files of earlier tests are removed, so that await_output never
# sees them. start_fifo_publisher NAME [ARGS [QUIET, default -q]]
start_fifo_publisher() {
	rm -f "$tmp/fifo" "$tmp/a" "$tmp/b" "$tmp/out"
	mkfifo "$tmp/fifo"
	"$CAT" ${3--q} -P "$1" ${2:-} <"$tmp/fifo" 2>"$tmp/pub.err" &
	fifo_pub=$!
	bg_pids+=($fifo_pub)
	exec 7>"$tmp/fifo"
}

# While stdin is idle the publisher still admits subscribers: B, arriving
# between two inputs, gets the second one.
# idle_case PUB_ARGS SUB_ARGS FIRST SECOND (printf formats)
idle_case() {
	local a b arc brc
	start_fifo_publisher idle "$1"
	$T "$CAT" -q -W -C idle $2 -c 2 >"$tmp/a" 2>"$tmp/a.err" 7>&- &
	a=$!
	printf "$3" >&7
	await_output "$tmp/a"
	$T "$CAT" -q -C idle $2 -c 1 >"$tmp/b" 2>"$tmp/b.err" 7>&- &
	b=$!
	sleep 0.5
	printf "$4" >&7
	wait $b
	brc=$?
	wait $a
	arc=$?
	exec 7>&-
	wait $fifo_pub
	[ $arc -eq 0 ] && [ $brc -eq 0 ] && [ "$(cat "$tmp/b")" = "$(printf "$4")" ]
	report $? "a subscriber arriving while stdin is idle is admitted (${1:-lines}; A $arc, B $brc)" \
		"$tmp/a.err" "$tmp/b.err" "$tmp/pub.err"
}

test_idle_input() {
	idle_case "" "" 'one\n' 'two\n'
	idle_case "-b 3" "-d \\n" 'one' 'two'
}

test_publisher_killed() {
	local sub rc
	start_fifo_publisher dead
	$T "$CAT" -W -C dead >"$tmp/out" 2>"$tmp/err" 7>&- &
	sub=$!
	echo hello >&7
	await_output "$tmp/out"
	kill -9 $fifo_pub
	wait $fifo_pub 2>/dev/null # no "Killed" notice
	wait $sub
	rc=$?
	exec 7>&-
	[ $rc -eq 1 ] && [ "$(cat "$tmp/out")" = hello ] &&
		one_line "$tmp/err" "stream 'dead'.*publisher died"
	report $? "a subscriber of a SIGKILLed publisher exits 1 with one line naming the stream (status $rc)" \
		"$tmp/err"
}

test_publisher_terminated() {
	local sub rc prc
	start_fifo_publisher term
	$T "$CAT" -W -C term >"$tmp/out" 2>"$tmp/err" 7>&- &
	sub=$!
	echo hello >&7
	await_output "$tmp/out"
	kill -TERM $fifo_pub
	wait $fifo_pub
	prc=$?
	wait $sub
	rc=$?
	exec 7>&-
	[ $prc -eq 143 ] && [ $rc -eq 1 ] && one_line "$tmp/err" "stream 'term'.*code $(errno_of ECANCELED).*disconnected"
	report $? "SIGTERM ends the publisher by the signal ($prc) and disconnects the stream: ECANCELED by default (subscriber $rc)" \
		"$tmp/err" "$tmp/pub.err"
	"$CAT" -C term 2>"$tmp/err"
	[ $? -eq 1 ] && grep -q "no such stream" "$tmp/err"
	report $? "the interrupted publisher removed its stream" "$tmp/err"
}

errno_of() { python3 -c "import errno; print(errno.$1)" 2>/dev/null || echo '[0-9]*'; }

# Our reader leaves: no noise, status 0, and the publisher is released.
test_epipe() {
	local pub rc prc
	seq 1 200000 | "$CAT" -q -P pipe -w 1 2>"$tmp/pub.err" &
	pub=$!
	bg_pids+=($pub)
	$T "$CAT" -W -C pipe 2>"$tmp/err" | head -1 >"$tmp/out"
	rc=${PIPESTATUS[0]}
	[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && [ "$(cat "$tmp/out")" = 1 ]
	report $? "'crs-cat -C | head -1' exits 0 without a word on stderr (status $rc)" "$tmp/err"
	# No subscriber left: the lockstep publisher holds; end it.
	kill -TERM $pub
	wait $pub
	prc=$?
	[ $prc -eq 143 ]
	report $? "the held publisher ends on SIGTERM (status $prc)" "$tmp/pub.err"
}

test_too_long() {
	local pub prc rc
	head -c 10000 /dev/zero | tr '\0' a | $T "$CAT" -q -P long -m 4K -w 1 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C long >"$tmp/out" 2>"$tmp/err"
	rc=$?
	wait $pub
	prc=$?
	[ $rc -eq 1 ] && [ $prc -eq 1 ] &&
		one_line "$tmp/err" "stream 'long'.*code $(errno_of EMSGSIZE)" &&
		one_line "$tmp/pub.err" "stream 'long'.*line longer"
	report $? "a line longer than -m fails the stream: both sides exit 1 (publisher $prc, consumer $rc)" \
		"$tmp/pub.err" "$tmp/err"
}

test_duplicate_publisher() {
	local rc
	start_fifo_publisher dup
	echo x >&7 # once a subscriber got it, the publisher surely is up
	$T "$CAT" -q -W -C dup -c 1 >/dev/null 7>&-
	"$CAT" -P dup </dev/null 2>"$tmp/err" 7>&-
	rc=$?
	exec 7>&-
	wait $fifo_pub
	[ $rc -eq 1 ] && one_line "$tmp/err" "stream 'dup'.*another publisher"
	report $? "a second publisher of a live name exits 1 (status $rc)" "$tmp/err"
}

# A stopped subscriber: the publisher gives up after -t and still exits 0;
# the subscriber, resumed, reads everything and the completion.
test_consume_timeout() {
	seq 1 1000 >"$tmp/in.txt"
	local sub pub t0 ms prc rc
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	$T "$CAT" -q -P slow -t 0.5 <"$tmp/fifo" 2>"$tmp/pub.err" &
	pub=$!
	exec 7>"$tmp/fifo"
	"$CAT" -q -W -C slow -p 5000 >"$tmp/out" 2>"$tmp/err" 7>&- &
	sub=$!
	bg_pids+=($sub)
	sleep 0.3
	kill -STOP $sub
	cat "$tmp/in.txt" >&7
	exec 7>&-
	t0=$(now_ms)
	wait $pub
	prc=$?
	ms=$(($(now_ms) - t0))
	kill -CONT $sub
	wait $sub
	rc=$?
	[ $prc -eq 0 ] && [ $ms -ge 400 ] && one_line "$tmp/pub.err" "1 subscriber had not consumed"
	report $? "-t 0.5: the publisher waits for a stopped subscriber, warns, exits 0 ($ms ms, status $prc)" \
		"$tmp/pub.err"
	[ $rc -eq 0 ] && cmp -s "$tmp/in.txt" "$tmp/out"
	report $? "the resumed subscriber still reads everything and the completion (status $rc)" "$tmp/err"
}

# Replay: A (-c 20; -w 1 makes sure it sees them all) proves that lines
# 1..20 went out; B, arriving later, first gets what the stream
# retained, then the live lines 21..25.
# replay_case NAME PUB_ARGS WANT_RETAINED (a printf format) [FMT]: the
# input lines are printf FMT (default %d) of 1..25.
replay_case() {
	local name=$1 fmt=${4:-%d} a b arc brc prc
	start_fifo_publisher "$name" "-w 1 $2"
	$T "$CAT" -q -W -C "$name" -c 20 >"$tmp/a" 2>"$tmp/a.err" 7>&- &
	a=$!
	printf "$fmt\n" $(seq 1 20) >&7
	wait $a
	arc=$?
	$T "$CAT" -q -C "$name" >"$tmp/b" 2>"$tmp/b.err" 7>&- &
	b=$!
	printf "$3" >"$tmp/want"
	await_lines "$tmp/b" "$(wc -l <"$tmp/want")"
	printf "$fmt\n" $(seq 21 25) >&7
	exec 7>&-
	wait $b
	brc=$?
	wait $fifo_pub
	prc=$?
	printf "$fmt\n" $(seq 21 25) >>"$tmp/want"
	[ $arc -eq 0 ] && [ $brc -eq 0 ] && [ $prc -eq 0 ] && cmp -s "$tmp/want" "$tmp/b"
	report $? "$2: a late subscriber gets the retained $(printf "$3" | head -1)..$(printf "$3" | tail -1), then the live lines (A $arc, B $brc, publisher $prc)" \
		"$tmp/a.err" "$tmp/b.err" "$tmp/pub.err"
}

test_replay() {
	replay_case replay "-R 5" '16\n17\n18\n19\n20\n'
	replay_case rbytes "--replay-bytes 6" '18\n19\n20\n' %02d
	replay_case rboth "-R 4 --replay-bytes 1K --replay-age 60" '17\n18\n19\n20\n'
	replay_case rage "--replay-age 60" "$(printf '%d\\n' $(seq 1 20))"
}

# Replay by age, coarsely: messages a second old are gone for a bound of
# 0.2 s. B's first line is live (or young), whenever B got in.
test_replay_expired() {
	local a b brc prc k first ok=1
	start_fifo_publisher rold "-w 1 --replay-age 0.2"
	$T "$CAT" -q -W -C rold -c 20 >"$tmp/a" 2>"$tmp/a.err" 7>&- &
	a=$!
	seq 1 20 >&7
	wait $a
	sleep 1
	$T "$CAT" -q -C rold >"$tmp/b" 2>"$tmp/b.err" 7>&- &
	b=$!
	for k in $(seq 21 220); do
		echo $k >&7
		[ -s "$tmp/b" ] && break
		sleep 0.05
	done
	exec 7>&-
	wait $b
	brc=$?
	wait $fifo_pub
	prc=$?
	first=$(head -1 "$tmp/b")
	[ $brc -eq 0 ] && [ $prc -eq 0 ] && [ -n "$first" ] && [ "$first" -gt 20 ] &&
		cmp -s "$tmp/b" <(seq "$first" "$k") && ok=0
	report $ok "--replay-age 0.2: a subscriber arriving a second later gets no old line (first: ${first:-none}; B $brc, publisher $prc)" \
		"$tmp/b.err" "$tmp/pub.err"
}

# -a 2: nothing is published to the first subscriber alone; once the
# second is there, both get everything from the first line.
test_auto_connect() {
	local pub a b arc brc prc early
	seq 1 20 >"$tmp/in.txt"
	rm -f "$tmp/a" "$tmp/b"
	$T "$CAT" -q -P auto -a 2 <"$tmp/in.txt" 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C auto >"$tmp/a" 2>"$tmp/a.err" &
	a=$!
	sleep 0.3
	early=$(wc -l <"$tmp/a")
	$T "$CAT" -q -W -C auto >"$tmp/b" 2>"$tmp/b.err" &
	b=$!
	wait $a
	arc=$?
	wait $b
	brc=$?
	wait $pub
	prc=$?
	[ "$early" -eq 0 ] && [ $arc -eq 0 ] && [ $brc -eq 0 ] && [ $prc -eq 0 ] &&
		cmp -s "$tmp/in.txt" "$tmp/a" && cmp -s "$tmp/in.txt" "$tmp/b"
	report $? "-a 2: nothing for one subscriber ($early lines), both of two get all 20 (A $arc, B $brc, publisher $prc)" \
		"$tmp/a.err" "$tmp/b.err" "$tmp/pub.err"
}

# --overflow drop: the subscriber takes one message and leaves; the rest
# finds no demand and is dropped, counted in the publisher's last line.
test_overflow_drop() {
	local pub rc prc sent dropped
	seq 1 20 >"$tmp/in.txt"
	rm -f "$tmp/out"
	$T "$CAT" -P odrop --overflow drop -w 1 <"$tmp/in.txt" 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C odrop -p 1 -c 1 >"$tmp/out" 2>"$tmp/err"
	rc=$?
	wait $pub
	prc=$?
	sent=$(sed -n "s/.*published \([0-9]*\) messages\? .* to 'odrop', dropped \([0-9]*\)$/\1/p" "$tmp/pub.err")
	dropped=$(sed -n "s/.*published \([0-9]*\) messages\? .* to 'odrop', dropped \([0-9]*\)$/\2/p" "$tmp/pub.err")
	[ $rc -eq 0 ] && [ $prc -eq 0 ] && [ "$dropped" = 19 ] && [ "$sent" = 1 ] &&
		[ "$(cat "$tmp/out")" = 1 ]
	report $? "--overflow drop -w 1, a subscriber taking one line: the publisher exits 0 and reports ${dropped:-no} dropped, ${sent:-no} sent (publisher $prc, consumer $rc)" \
		"$tmp/pub.err" "$tmp/err"
}

# --overflow error: the subscriber, stopped, has asked for two lines; the
# third fails the stream with ENOBUFS on both sides.
test_overflow_error() {
	local a arc prc
	start_fifo_publisher oerr "--overflow error -w 1"
	"$CAT" -W -C oerr -p 1 >"$tmp/a" 2>"$tmp/a.err" 7>&- &
	a=$!
	bg_pids+=($a)
	echo 1 >&7
	await_output "$tmp/a"
	kill -STOP $a
	seq 2 5 >&7
	exec 7>&-
	wait $fifo_pub
	prc=$?
	kill -CONT $a
	wait $a
	arc=$?
	[ $prc -eq 1 ] && [ $arc -eq 1 ] &&
		one_line "$tmp/pub.err" "stream 'oerr'.*--overflow error.*code $(errno_of ENOBUFS)" &&
		one_line "$tmp/a.err" "stream 'oerr'.*code $(errno_of ENOBUFS)"
	report $? "--overflow error: no demand fails the stream with ENOBUFS, both exit 1 (publisher $prc, consumer $arc)" \
		"$tmp/pub.err" "$tmp/a.err"
}

# --overflow latest: while the subscriber is stopped, only the newest
# line is kept; it still arrives, last, before the completion.
test_overflow_latest() {
	local a arc prc sent dropped
	start_fifo_publisher olatest "--overflow latest -w 1" ""
	"$CAT" -q -W -C olatest -p 1 >"$tmp/a" 2>"$tmp/a.err" 7>&- &
	a=$!
	bg_pids+=($a)
	echo 1 >&7
	await_output "$tmp/a"
	kill -STOP $a
	seq 2 10 >&7
	exec 7>&-
	sleep 0.3 # let the publisher read it all (not needed to pass)
	kill -CONT $a
	wait $a
	arc=$?
	wait $fifo_pub
	prc=$?
	sent=$(sed -n "s/.*published \([0-9]*\) messages\? .* to 'olatest', dropped \([0-9]*\)$/\1/p" "$tmp/pub.err")
	dropped=$(sed -n "s/.*published \([0-9]*\) messages\? .* to 'olatest', dropped \([0-9]*\)$/\2/p" "$tmp/pub.err")
	[ $arc -eq 0 ] && [ $prc -eq 0 ] && [ "$(head -1 "$tmp/a")" = 1 ] &&
		[ "$(tail -1 "$tmp/a")" = 10 ] && sort -c -n "$tmp/a" 2>/dev/null &&
		[ -n "$sent" ] && [ "$(wc -l <"$tmp/a")" -eq "$sent" ] && [ $((sent + dropped)) -eq 10 ]
	report $? "--overflow latest: the newest line arrives last, the others are counted ($(tr '\n' ' ' <"$tmp/a"); dropped ${dropped:-?})" \
		"$tmp/pub.err" "$tmp/a.err"
}

# --on-disconnect: what a subscriber gets when the publisher is stopped
# by a signal. disconnect_case STRATEGY WANT_STATUS ERROR_PATTERN
disconnect_case() {
	local sub rc prc name=disc$2
	start_fifo_publisher $name "--on-disconnect $1"
	$T "$CAT" -W -C $name >"$tmp/out" 2>"$tmp/err" 7>&- &
	sub=$!
	echo hello >&7
	await_output "$tmp/out"
	kill -TERM $fifo_pub
	wait $fifo_pub
	prc=$?
	wait $sub
	rc=$?
	exec 7>&-
	if [ $2 -eq 0 ]; then
		[ $prc -eq 143 ] && [ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = hello ] && grep -q "received 1 message (" "$tmp/err"
	else
		[ $prc -eq 143 ] && [ $rc -eq $2 ] && [ "$(cat "$tmp/out")" = hello ] && one_line "$tmp/err" "$3"
	fi
	report $? "--on-disconnect $1, SIGTERM: the subscriber exits $rc${3:+ ($3)} (publisher $prc)" \
		"$tmp/err" "$tmp/pub.err"
}

test_on_disconnect() {
	disconnect_case complete 0
	disconnect_case none 1 "code $(errno_of EPIPE).*closed without completing"
	disconnect_case error 1 "code $(errno_of ECANCELED).*disconnected"
}

# Every long option of the help is documented in the man page (the
# short ones are checked by test_top_man.sh).
test_long_options_documented() {
	local man opt bad=0
	man=$(dirname "$0")/../man/crs-cat.1
	[ -f "$man" ] || { report 0 "long options: no man page at $man (skipped)"; return; }
	for opt in $("$CAT" -h | grep -o -- '--[a-z][a-z-]*' | sort -u); do
		if ! grep -F -- "${opt//-/\\-}" "$man" | grep -q '^\.B'; then
			echo "       | $opt is not documented in $man"
			bad=1
		fi
	done
	report $bad "every long option of -h is documented in the man page"
}

test_usage() {
	local args rc bad=0
	while IFS= read -r args; do
		eval "set -- $args"
		"$CAT" "$@" >/dev/null 2>"$tmp/err"
		rc=$?
		if [ $rc -ne 2 ] || ! grep -q "crs-cat -h" "$tmp/err"; then
			echo "       | crs-cat $args: status $rc"
			bad=1
		fi
	done <<'EOF'

-P
-P a -C b
-P a -P b
-C x -w 1
-P x -c 1
-P x -p 4
-C 'a/b'
-C .hidden
-P x -b
-P x -b 0
-P x -b -4
-P x -r 3000
-P x -r 1M -m 512K
-P x -m 64K -b 128K
-C x -p 0
-C x -c 0
-C x -c many
-P x -w 65
-P x -t -1
-P x -d ab
-P x -d '\q'
-P x -d , -b 4K
-Z
-C x extra
-C x -a 1
-C x -R 3
-C x --replay-bytes 1K
-C x --replay-age 1
-C x --overflow drop
-C x --on-disconnect none
-P x -a 65
-P x -R -1
-P x -R many
-P x --replay-bytes 0
-P x --replay-age 0
-P x --replay-age -1
-P x --replay-age soon
-P x --overflow sometimes
-P x --on-disconnect maybe
-P x --overflow
-P x --bogus
-P
-P -q
-C -- -x
-C a b
-C x -F -e
-C x -f '%q'
-C x -f '\q'
-C x -f x -d ,
-C x -f x -b
-C x --linger 1
-C x --untethered 1
-C x --allow-any
-C x --allow-uid 0
-C x --allow-group 0
-P x -F
-P x -e
-P x -f %s
-P x -d ''
-P x --linger
-P x --linger soon
-P x --linger -1
-P x --untethered 0
-P x --untethered never
-P x --allow-uid no_such_user_zz
-P x --allow-group no_such_group_zz
-P x --allow-uid 1 --allow-uid 2 --allow-uid 3 --allow-uid 4 --allow-uid 5 --allow-uid 6 --allow-uid 7 --allow-uid 8 --allow-uid 9
EOF
	report $bad "usage errors exit 2 with a hint"
	"$CAT" -h >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc -eq 0 ] && grep -q "^usage: crs-cat -P NAME" "$tmp/out" && [ ! -s "$tmp/err" ]
	report $? "-h prints the usage on stdout and exits 0"
}

# ---- Names, and the options of crs-cat for pipelines ---------------------

# The name may follow the options (crs-cat -C -W NAME); an option is never
# taken for a name, and no stream called '-q' is ever created.
test_name_operand() {
	local sub rc prc
	rm -f "$tmp/out"
	$T "$CAT" -C -W -q opnd >"$tmp/out" 2>"$tmp/sub.err" &
	sub=$!
	seq 3 | $T "$CAT" -P -q -w 1 opnd 2>"$tmp/pub.err"
	prc=$?
	wait $sub
	rc=$?
	[ $prc -eq 0 ] && [ $rc -eq 0 ] && cmp -s "$tmp/out" <(seq 3)
	report $? "the name as a trailing operand: 'crs-cat -C -W -q opnd' and 'crs-cat -P -q -w 1 opnd' (publisher $prc, consumer $rc)" \
		"$tmp/pub.err" "$tmp/sub.err"
	seq 3 | "$CAT" -P -q 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] && grep -q -- "-P needs a stream NAME" "$tmp/err" &&
		[ -z "$(ls "$CRS_DIR" 2>/dev/null | grep -- '^-')" ]
	report $? "'crs-cat -P -q' is a usage error and creates no stream named '-q' (status $rc)" "$tmp/err"
	"$CAT" -C -- -x 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] && grep -q "bad stream name '-x'.*nor '-'" "$tmp/err"
	report $? "a name starting with '-' is refused (status $rc)" "$tmp/err"
}

# A lockstep publisher with nobody there says so, once; -q silences it.
test_waiting_notice() {
	local pub prc rc
	rm -f "$tmp/pub.err"
	printf 'a\nb\nc\n' | $T "$CAT" -P lone -b 1 2>"$tmp/pub.err" &
	pub=$!
	wait_for_line "$tmp/pub.err" "waiting for a subscriber on 'lone'"
	$T "$CAT" -q -C lone -d '' 2>/dev/null # a usage error: no subscription
	$T "$CAT" -q -C lone -b >"$tmp/out" 2>"$tmp/sub.err"
	rc=$?
	wait $pub
	prc=$?
	[ $prc -eq 0 ] && [ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = "$(printf 'a\nb\nc\n')" ] &&
		[ "$(grep -c "waiting for a subscriber" "$tmp/pub.err")" -eq 1 ]
	report $? "a lockstep publisher with no subscriber says once that it waits for one (publisher $prc, consumer $rc)" \
		"$tmp/pub.err" "$tmp/sub.err"
	printf 'a\n' | $T "$CAT" -q -P quiet 2>"$tmp/pub.err" &
	pub=$!
	$T "$CAT" -q -W -C quiet >"$tmp/out" 2>"$tmp/sub.err"
	wait $pub
	[ ! -s "$tmp/pub.err" ] && [ "$(cat "$tmp/out")" = a ]
	report $? "with -q the publisher says nothing" "$tmp/pub.err"
}

# Wait up to 10 s for FILE to hold a line matching PATTERN.
wait_for_line() {
	local i
	for i in $(seq 200); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

# --linger: a replay stream of a short input stays open; a subscriber
# arriving after the end of input still gets everything and the
# completion. The linger ends by itself.
test_linger() {
	local pub prc rc t0 ms
	rm -f "$tmp/pub.err"
	t0=$(now_ms)
	seq 100 | $T "$CAT" -P lin -R 100 --linger 30 2>"$tmp/pub.err" &
	pub=$!
	bg_pids+=($pub)
	wait_for_line "$tmp/pub.err" "lingering 30 s"
	$T "$CAT" -q -C lin >"$tmp/out" 2>"$tmp/sub.err"
	rc=$?
	$T "$CAT" -q -C lin -f '%o\n' >"$tmp/out2" 2>>"$tmp/sub.err"
	[ $rc -eq 0 ] && cmp -s "$tmp/out" <(seq 100) && cmp -s "$tmp/out2" <(seq 0 99) &&
		kill -0 $pub 2>/dev/null
	report $? "--linger 30: after the end of input two late subscribers each get all 100 retained lines and the completion (status $rc)" \
		"$tmp/pub.err" "$tmp/sub.err"
	kill -TERM $pub
	wait $pub
	printf 'x\n' | $T "$CAT" -q -P lin2 -R 1 --linger 0.3 2>"$tmp/pub.err"
	prc=$?
	ms=$(($(now_ms) - t0))
	[ $prc -eq 0 ] && [ ! -s "$tmp/pub.err" ]
	report $? "--linger 0.3 with nobody there ends by itself and exits 0 (status $prc)" "$tmp/pub.err"
}

# --untethered: a stopped subscriber holds a lockstep stream back; with
# --untethered 0.5 it is cut off (ETIMEDOUT) and the other one gets
# everything.
test_untethered() {
	local a b arc brc prc
	seq 1 2000 >"$tmp/in.txt"
	start_fifo_publisher unt "-w 2 --untethered 0.5"
	"$CAT" -W -C unt -p 1 >"$tmp/a" 2>"$tmp/a.err" 7>&- &
	a=$!
	bg_pids+=($a)
	$T "$CAT" -q -W -C unt >"$tmp/b" 2>"$tmp/b.err" 7>&- &
	b=$!
	echo 1 >&7
	await_output "$tmp/a"
	kill -STOP $a
	tail -n +2 "$tmp/in.txt" >&7
	exec 7>&-
	wait $b
	brc=$?
	wait $fifo_pub
	prc=$?
	kill -CONT $a
	wait $a
	arc=$?
	[ $brc -eq 0 ] && [ $prc -eq 0 ] && cmp -s "$tmp/b" "$tmp/in.txt" && [ $arc -eq 1 ] &&
		one_line "$tmp/a.err" "stream 'unt'.*code $(errno_of ETIMEDOUT)"
	report $? "--untethered 0.5: a stopped subscriber is cut off with ETIMEDOUT, the other gets all 2000 lines (publisher $prc, A $arc, B $brc)" \
		"$tmp/pub.err" "$tmp/a.err" "$tmp/b.err"
}

# --allow-uid/--allow-group/--allow-any: user nobody subscribes (as root
# only, which can become another user; skipped otherwise).
test_allow() {
	if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
		report 0 "--allow-uid/--allow-group/--allow-any: not root or no setpriv (skipped)"
		return
	fi
	local dir args rc prc pub name i=0
	dir=$(mktemp -d "$(dirname "$tmp")/crs-allow.XXXXXX") || return
	chmod 0711 "$dir"
	mkdir -m 0711 "$dir/run"
	as_nobody() { CRS_DIR=$dir/run setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }
	for args in "--allow-uid 65534" "--allow-uid nobody --allow-uid 1" "--allow-group 65534" "--allow-any" ""; do
		i=$((i + 1))
		name=allow$i
		seq 3 | CRS_DIR=$dir/run $T "$CAT" -q -P $name -w 1 -t 2 $args 2>"$tmp/pub.err" &
		pub=$!
		as_nobody $T "$CAT" -q -W -C $name >"$tmp/out" 2>"$tmp/err"
		rc=$?
		if [ -n "$args" ]; then
			wait $pub
			prc=$?
			[ $rc -eq 0 ] && [ $prc -eq 0 ] && cmp -s "$tmp/out" <(seq 3)
			report $? "$args: user nobody subscribes and gets everything (publisher $prc, consumer $rc)" \
				"$tmp/pub.err" "$tmp/err"
		else
			kill -TERM $pub
			wait $pub
			[ $rc -eq 1 ] && one_line "$tmp/err" "stream '$name'.*code $(errno_of EACCES)"
			report $? "without --allow-*, user nobody is refused with EACCES (status $rc)" "$tmp/err"
		fi
	done
	rm -rf "$dir"
}

# -F: follow the name across publishers: one that lingers (not
# subscribed again), one that completes, one that is killed; one line on
# stderr at each end and at each new publisher.
test_follow() {
	local f frc
	rm -f "$tmp/f" "$tmp/f.err"
	"$CAT" -C -F fol >"$tmp/f" 2>"$tmp/f.err" &
	f=$!
	bg_pids+=($f)
	seq 1 3 | $T "$CAT" -q -P fol -R 10 --linger 30 -w 1 2>"$tmp/pub1.err" &
	local p1=$!
	bg_pids+=($p1)
	wait_for_line "$tmp/f.err" "completed after 3 messages; following: waiting"
	kill -TERM $p1
	wait $p1 2>/dev/null
	seq 4 6 | $T "$CAT" -q -P fol -w 1 2>"$tmp/pub2.err"
	start_fifo_publisher fol "-w 1"
	echo 7 >&7
	await_lines "$tmp/f" 7
	kill -9 $fifo_pub
	wait $fifo_pub 2>/dev/null
	exec 7>&-
	wait_for_line "$tmp/f.err" "publisher died.*after 1 message;"
	kill -TERM $f
	wait $f
	frc=$?
	[ $frc -eq 143 ] && cmp -s "$tmp/f" <(seq 7) &&
		[ "$(grep -c "following: waiting for a new publisher" "$tmp/f.err")" -eq 3 ] &&
		[ "$(grep -c "following a new publisher" "$tmp/f.err")" -eq 2 ] &&
		grep -q "ended (code $(errno_of EPIPE): publisher died) after 1 message;" "$tmp/f.err"
	report $? "-F follows three publishers (lingering, completing, killed): 1..7 once each, a line per end and per new publisher (status $frc)" \
		"$tmp/f.err" "$tmp/pub1.err" "$tmp/pub2.err"
}

# -e: a late subscriber of a replay stream gets what is retained and
# exits once caught up, while the publisher lives on.
test_exit_caught_up() {
	local a b arc brc prc
	start_fifo_publisher catchup "-w 1 -R 5"
	$T "$CAT" -q -W -C catchup -c 20 >"$tmp/a" 2>"$tmp/a.err" 7>&- &
	a=$!
	seq 1 20 >&7
	wait $a
	arc=$?
	$T "$CAT" -C catchup -e >"$tmp/b" 2>"$tmp/b.err" 7>&-
	brc=$?
	kill -0 $fifo_pub 2>/dev/null
	local alive=$?
	exec 7>&-
	wait $fifo_pub
	prc=$?
	[ $arc -eq 0 ] && [ $brc -eq 0 ] && [ $alive -eq 0 ] && [ $prc -eq 0 ] &&
		cmp -s "$tmp/b" <(seq 16 20) && one_line "$tmp/b.err" "received 5 messages .*caught up (-e)"
	report $? "-e: a late subscriber gets the 5 retained lines and exits 0 while the publisher lives (B $brc, publisher $prc)" \
		"$tmp/b.err" "$tmp/pub.err"
}

# -f: sequence number, length, name, payload, receive time.
test_format() {
	local t0 t1 ok=1
	printf 'a\nbcd\n\n' >"$tmp/in"
	pass_through fmt '0:1:a|fmt%%\n1:3:bcd|fmt%%\n2:0:|fmt%%\n' "" "-f %o:%S:%s|%t%%\\n"
	report $? "-f '%o:%S:%s|%t%%\\n' writes sequence, length, payload and name" "$tmp/pub.err" "$tmp/sub.err"
	printf 'x\0y\n' >"$tmp/in"
	pass_through fmtb '[x\0y\n]\t' "-b 64" "-f [%s]\\t"
	report $? "-f '[%s]\\t' with binary payloads writes them as they are" "$tmp/pub.err" "$tmp/sub.err"
	printf 'one\n' >"$tmp/in"
	t0=$(date +%s%3N)
	pass_through fmtt '' "" "-f %T"
	t1=$(date +%s%3N)
	[ "$(cat "$tmp/out")" -ge "$t0" ] 2>/dev/null && [ "$(cat "$tmp/out")" -le "$t1" ] && ok=0
	report $ok "-f %T is the receive time in ms since the epoch ($t0 <= $(cat "$tmp/out") <= $t1)"
}

# Errors that name what is wrong; --help.
test_usage_messages() {
	local bad=0 args want
	while IFS='|' read -r args want; do
		eval "set -- $args"
		"$CAT" "$@" >/dev/null 2>"$tmp/err"
		if ! grep -q -- "$want" "$tmp/err"; then
			echo "       | crs-cat $args: no '$want' in: $(head -1 "$tmp/err")"
			bad=1
		fi
	done <<'EOF'
-Z|unknown option -Z
-C x -qZ|unknown option -Z
-C x --bogus|unknown option --bogus
-P x --linger|--linger needs an argument
-C x -c|-c needs an argument
-P x -d ''|'' is none
-C x -F -e|give one of them
-C x -f '%q'|bad directive '%q'
-C x -f x -b|excludes -d and -b
-C|-C needs a stream NAME
-C a b|two stream names
EOF
	report $bad "usage errors name the option or argument at fault"
	"$CAT" --help >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 0 ] && grep -q "^usage: crs-cat -P NAME" "$tmp/out" && [ ! -s "$tmp/err" ]
	report $? "--help prints the usage on stdout and exits 0"
}

test_usage
test_delimiters
test_no_subscriber
test_binary_100m
test_lines_1m
test_small_ring
test_three_subscribers
test_take
test_wait_stream
test_idle_input
test_publisher_killed
test_publisher_terminated
test_epipe
test_too_long
test_duplicate_publisher
test_consume_timeout
test_replay
test_replay_expired
test_auto_connect
test_overflow_drop
test_overflow_error
test_overflow_latest
test_on_disconnect
test_name_operand
test_waiting_notice
test_linger
test_untethered
test_allow
test_follow
test_exit_caught_up
test_format
test_usage_messages
test_long_options_documented

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
