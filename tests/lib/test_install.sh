#!/usr/bin/env bash
# The installed library, used as a program outside the tree would use it:
# `cmake --install` into a temporary prefix, then tests/lib/consumer.c built
# against it once with pkg-config and once with find_package(skyfind); each
# build runs the lesson and sextractor pipelines on an array in memory, and
# its catalogue must equal the installed `skyfind run` on the same pixels
# written to FITS (every row; the comment lines too, which name the input,
# pipeline, backend and background), and so must its sf_find table (the
# one-call entry point of skyfind/skyfind.h) printed with the columns'
# formats. Also: the programs load libskyfind.so.0
# (not a static copy), and the library's soname is libskyfind.so.0.
#   test_install.sh BUILD_DIR SOURCE_DIR [CFLAGS]
# CFLAGS (the build's CMAKE_C_FLAGS) are used for the consumer too: under
# the sanitizer build the program is instrumented as the library is.
set -u
B=${1:?BUILD_DIR} S=${2:?SOURCE_DIR} CF=${3:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
cmake --install "$B" --prefix "$T/prefix" >"$T/install.log" 2>&1 || { cat "$T/install.log"; exit 1; }
P=$T/prefix
pc=$(find "$P" -name skyfind.pc | head -1)
so=$(find "$P" -name 'libskyfind.so.0' | head -1)
[ -n "$pc" ] && [ -n "$so" ] && [ -f "$(dirname "$pc")/../cmake/skyfind/skyfindConfig.cmake" ] &&
    ok "installed: $(cd "$P" && find . -name 'libskyfind.so*' -o -name skyfind.pc -o -name skyfindConfig.cmake | sort | tr '\n' ' ')" ||
    { bad "install tree (pkg-config file, libskyfind.so.0, CMake package)"; exit 1; }
readelf -d "$so" | grep -q 'SONAME.*\[libskyfind.so.0\]' && ok "soname libskyfind.so.0" || bad "soname"
export SKYFIND_PIPELINES=$P/share/skyfind/pipelines
# 1. pkg-config
if PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --exists skyfind; then
    cc -O2 $CF -o "$T/c_pc" "$S/tests/lib/consumer.c" $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs skyfind) -lm \
        2>"$T/cc.log" && ok "pkg-config build: cc consumer.c \$(pkg-config --cflags --libs skyfind)" || { bad "pkg-config build"; cat "$T/cc.log"; }
else
    bad "pkg-config does not find skyfind.pc"
fi
# 2. find_package
cmake -S "$S/tests/lib" -B "$T/fp" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$CF" >"$T/fp.log" 2>&1 &&
    cmake --build "$T/fp" >>"$T/fp.log" 2>&1 && cp "$T/fp/consumer" "$T/c_fp" && ok "find_package(skyfind) build" ||
    { bad "find_package build"; tail -20 "$T/fp.log"; }
for c in c_pc c_fp; do
    [ -x "$T/$c" ] || continue
    # the shared library, from the installed tree
    ldd "$T/$c" | grep -q "libskyfind.so.0 => $P" && ok "$c loads $(ldd "$T/$c" | grep -o 'libskyfind.so.0 => [^ ]*' | sed "s|$T|TMP|")" ||
        bad "$c does not load the installed libskyfind.so.0: $(ldd "$T/$c" | grep skyfind)"
    for p in lesson sextractor; do
        rm -rf "$T/cli"
        "$T/$c" $p "$T/img.fits" "$T/lib.csv" >"$T/run.log" 2>&1 || { bad "$c $p: $(cat "$T/run.log")"; continue; }
        "$P/bin/skyfind" run -q -b cpu -p $p -o "$T/cli" "$T/img.fits" || { bad "$c $p: the CLI failed"; continue; }
        n=$(grep -vc '^#' "$T/lib.csv")
        if cmp -s "$T/lib.csv" "$T/cli/img.cat.csv" && [ "$n" -gt 5 ]; then
            ok "$c $p: $((n - 1)) sources, the catalogue equals skyfind run's byte for byte"
        else
            bad "$c $p: the catalogues differ ($((n - 1)) rows from the library)"
            diff "$T/lib.csv" "$T/cli/img.cat.csv" | head -6
        fi
        if cmp -s "$T/lib.csv.find" <(grep -v '^#' "$T/cli/img.cat.csv"); then
            ok "$c $p: sf_find's table printed with its column formats equals the CLI's rows"
        else
            bad "$c $p: sf_find's table differs from the CLI's rows"
            diff "$T/lib.csv.find" <(grep -v '^#' "$T/cli/img.cat.csv") | head -6
        fi
    done
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
