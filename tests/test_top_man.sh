#!/bin/sh
# test_top_man.sh - the man pages match the tools: every option a tool's
# usage text (-h) lists is documented in its page's OPTIONS, and every
# option documented there is one the tool lists; the pages render without
# groff warnings (when groff is installed).
#
# usage: test_top_man.sh CRS_TOP CRS_CAT MAN_DIR
set -eu
top=$1
cat_=$2
man=$3
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }

status=0
for tool in "$top" "$cat_"; do
	page="$man/$(basename "$tool").1"
	"$tool" -h >"${TMPDIR:-/tmp}/top-man.$$" ||
		{ echo "FAIL: $tool -h failed"; status=1; continue; }
	python3 - "${TMPDIR:-/tmp}/top-man.$$" "$page" <<'PY' || status=1
import re, sys

usage, page = open(sys.argv[1]).read(), open(sys.argv[2]).read()
# Usage: option lines start with two spaces and a dash: "  -d C", "  -j, --json".
told = set()
for line in usage.splitlines():
    m = re.match(r"  (-\w)(?:, (--[\w-]+))?", line)
    if m:
        told.add(m.group(1))
# The page: the first words of each .TP tag in OPTIONS.
opts = page.split(".SH OPTIONS", 1)[1].split("\n.SH ", 1)[0]
lines = opts.splitlines()
documented = set()
for i, line in enumerate(lines):
    if line == ".TP" and i + 1 < len(lines):
        m = re.match(r"\.B[IR]? \\-(\w)", lines[i + 1])
        if m:
            documented.add("-" + m.group(1))
missing, extra = told - documented, documented - told
for o in sorted(missing):
    print(f"FAIL: {sys.argv[2]}: option {o} of the usage text is not documented")
for o in sorted(extra):
    print(f"FAIL: {sys.argv[2]}: documents {o}, which the usage text does not list")
if not told:
    print(f"FAIL: no options found in the usage text")
sys.exit(1 if missing or extra or not told else 0)
PY
	if command -v groff >/dev/null 2>&1; then
		warn=$(groff -man -ww -z "$page" 2>&1 || true)
		[ -z "$warn" ] || { echo "FAIL: groff warns on $page: $warn"; status=1; }
	fi
done
rm -f "${TMPDIR:-/tmp}/top-man.$$"
[ "$status" -eq 0 ] && echo "ok: man pages match the usage texts"
exit "$status"
