#!/bin/sh
# build-aeron.sh - build what crs-bench's Aeron baseline needs (the C
# client and the C media driver aeronmd, nothing else) and lay it out as
# an install prefix for `meson setup -Daeron=PREFIX`:
#   PREFIX/include/aeron/aeronc.h (and the headers it includes)
#   PREFIX/lib/libaeron_static.a, libaeron.so, libaeron_driver.so
#   PREFIX/bin/aeronmd
#
# usage: build-aeron.sh SOURCE PREFIX [REF]
#   SOURCE  a git clone (bare or not) of Aeron, or an unpacked source tree
#   PREFIX  an absolute path; the build tree goes to PREFIX.build
#   REF     with a git SOURCE: the tag or commit (default 1.47.3)
# JOBS (default 2) compile jobs, run under nice. Needs cmake, gcc, g++,
# make, libbsd-dev, uuid-dev, zlib1g-dev; downloads nothing (no Java, no
# tests, no archive client, no C++ client).
set -eu
src=${1:?usage: build-aeron.sh SOURCE PREFIX [REF]}
prefix=${2:?usage: build-aeron.sh SOURCE PREFIX [REF]}
ref=${3:-1.47.3}
jobs=${JOBS:-2}
case $prefix in
/*) ;;
*) echo "build-aeron.sh: PREFIX must be an absolute path" >&2; exit 2 ;;
esac
work=$prefix.build
rm -rf "$work" "$prefix"
mkdir -p "$work/src" "$work/build" "$prefix/bin" "$prefix/lib" "$prefix/include/aeron"

if git --git-dir="$src" rev-parse -q --verify "$ref^{commit}" >/dev/null 2>&1; then
	git --git-dir="$src" archive --format=tar "$ref" | tar -x -C "$work/src"
elif git -C "$src" rev-parse -q --verify "$ref^{commit}" >/dev/null 2>&1; then
	git -C "$src" archive --format=tar "$ref" | tar -x -C "$work/src"
elif [ -f "$src/version.txt" ]; then
	cp -R "$src/." "$work/src"
else
	echo "build-aeron.sh: $src is neither a git clone with $ref nor a source tree" >&2
	exit 2
fi
echo "Aeron $(cat "$work/src/version.txt") in $work/src"

# Aeron 1.47 asks for CMake 3.26; the C targets build with older ones
# (Debian 12 has 3.25), so lower its floor to the CMake at hand.
have=$(cmake --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')
grep -rl --include=CMakeLists.txt cmake_minimum_required "$work/src" |
	xargs sed -i -E \
		-e "s/cmake_minimum_required\(VERSION 3\.(2[6-9]|3[0-9])[.0-9]*/cmake_minimum_required(VERSION $have/" \
		-e "s/cmake_policy\(VERSION 3\.(2[6-9]|3[0-9])[.0-9]*/cmake_policy(VERSION $have/"

cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
	-DBUILD_AERON_DRIVER=ON -DBUILD_AERON_ARCHIVE_API=OFF \
	-DAERON_TESTS=OFF -DAERON_UNIT_TESTS=OFF -DAERON_SYSTEM_TESTS=OFF \
	-DAERON_SLOW_SYSTEM_TESTS=OFF -DAERON_BUILD_SAMPLES=OFF \
	-DAERON_BUILD_DOCUMENTATION=OFF -DAERON_INSTALL_TARGETS=OFF \
	-DC_WARNINGS_AS_ERRORS=OFF -DCXX_WARNINGS_AS_ERRORS=OFF
nice -n 19 cmake --build "$work/build" -j "$jobs" --target aeronmd aeron aeron_static

cp "$work/build/binaries/aeronmd" "$prefix/bin/"
cp "$work/build/lib/libaeron_static.a" "$work/build/lib/libaeron.so" \
	"$work/build/lib/libaeron_driver.so" "$prefix/lib/"
(cd "$work/src/aeron-client/src/main/c" &&
	find . -name '*.h' -exec cp --parents {} "$prefix/include/aeron/" \;)
echo "ok: meson setup BUILD -Daeron=$prefix"
