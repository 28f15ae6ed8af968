#!/bin/sh
# test_man.sh - man/crs-bridge.1 documents every option crs-bridge -h
# lists, lists none it lacks, and renders without groff warnings.
# usage: test_man.sh CRS_BRIDGE PAGE
set -eu
bridge=$1 page=$2
tmp=${TMPDIR:-/tmp}/bridge-man.$$
trap 'rm -f "$tmp".*' EXIT
"$bridge" -h | grep -o -- '--[a-z-]*' | sort -u >"$tmp.told"
sed -n '/^\.SH OPTIONS/,/^\.SH EXAMPLES/p' "$page" |
	grep -A1 '^\.TP' | grep -o -- '\\-\\-[a-z\\-]*' | sed 's/\\//g' |
	sort -u >"$tmp.documented"
status=0
if ! cmp -s "$tmp.told" "$tmp.documented"; then
	echo "FAIL: options differ (< usage, > page):"
	diff "$tmp.told" "$tmp.documented" || true
	status=1
fi
if command -v groff >/dev/null 2>&1; then
	warnings=$(groff -man -ww -z "$page" 2>&1)
	[ -z "$warnings" ] || { echo "FAIL: groff: $warnings"; status=1; }
fi
[ $status -eq 0 ] && echo "$(wc -l <"$tmp.told") options documented"
exit $status
