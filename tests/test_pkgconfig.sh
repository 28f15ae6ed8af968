#!/bin/sh
# test_pkgconfig.sh - a user's build against an installed crs sees only
# what crs.h needs. Installs the build with `meson install --destdir` into
# a temporary directory, points pkg-config there alone (liburing's and
# libbsd's .pc files are then out of its reach, as for a user without
# their -dev packages), and checks that:
#  - `pkg-config --cflags crs` works and gives nothing but -I;
#  - a program that uses getopt(3) and has its own strlcpy compiles and
#    links with `pkg-config --cflags --libs crs`, and runs (it publishes
#    and reads back a message through the installed libcrs.so);
#  - with only libcrs.a installed, `pkg-config --static --libs crs` links
#    the same program, and it runs.
#
# usage: test_pkgconfig.sh BUILD_DIR CC SOURCE [SANITIZE_FLAGS...]
set -eu
build=$1 cc=$2 src=$3
shift 3
tmp=$(mktemp -d "${CRS_TEST_TMP:-/tmp}/pkgconfig.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >/dev/null ||
	fail "meson install --destdir failed"
pc=$(find "$tmp/root" -name crs.pc)
[ -n "$pc" ] || fail "no crs.pc installed"
export PKG_CONFIG_LIBDIR="$(dirname "$pc")" PKG_CONFIG_PATH=
export PKG_CONFIG_SYSROOT_DIR="$tmp/root"
libdir=$(dirname "$(dirname "$pc")")

cflags=$(pkg-config --cflags crs) || fail "pkg-config --cflags crs fails"
for flag in $cflags; do
	case $flag in
	-I*) ;;
	*) fail "pkg-config --cflags crs leaks '$flag' (all: $cflags)" ;;
	esac
done
libs=$(pkg-config --libs crs) || fail "pkg-config --libs crs fails"
[ "$(echo $libs)" = "-L$libdir -lcrs" ] || fail "pkg-config --libs crs: '$libs'"
echo "ok: --cflags '$cflags', --libs '$libs'"

export CRS_DIR="$tmp/run"
mkdir -m 700 "$CRS_DIR"
run() { # run PROGRAM: it must print the message it read back
	out=$("$1" -n "user-$$") || fail "$1 failed: $out"
	[ "$out" = "received hello" ] || fail "$1 printed '$out'"
}

# shellcheck disable=SC2086 # flags are words
"$cc" "$@" -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Werror -o "$tmp/shared" \
	"$src" $cflags $libs || fail "building against libcrs.so fails"
LD_LIBRARY_PATH="$libdir" run "$tmp/shared"
echo "ok: getopt and own strlcpy, against libcrs.so"

rm -f "$libdir"/libcrs.so*
static=$(pkg-config --static --libs crs)
# shellcheck disable=SC2086
"$cc" "$@" -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Werror -o "$tmp/static" \
	"$src" $cflags $static || fail "building against libcrs.a with '$static' fails"
run "$tmp/static"
echo "ok: the same against libcrs.a with --static: '$static'"
