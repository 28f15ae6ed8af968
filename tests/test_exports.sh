#!/usr/bin/env bash
# The shared library exports exactly the functions declared in the public
# headers: nothing internal leaks, nothing public is missing.
# usage: test_exports.sh LIBCRS_SO INCLUDE_DIR
set -u
so=$1 inc=$2
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -ho 'crs_[a-z_]*(' "$inc"/crs/*.h | tr -d '(' | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
fail=0
[ -z "$extra" ] || { echo "exported but not declared: $extra"; fail=1; }
[ -z "$missing" ] || { echo "declared but not exported: $missing"; fail=1; }
n=$(echo "$declared" | wc -l)
echo "$n public functions checked"
echo "$((1 - fail)) passed, $fail failed"
exit $fail
