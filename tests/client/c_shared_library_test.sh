#!/usr/bin/env bash
# libstagefrontier.so: its dynamic symbols are the C ABI's sf_* functions and nothing else (a
# library exporting nothing, or the C++ stub and Abseil with it, are both defects), every
# function the header declares is there, and the C example builds and runs against it with
# plain gcc, the way docs/link-the-stub.md says.
set -euo pipefail
lib=client/c/libstagefrontier.so
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*" >&2; exit 1; }

[ -f "$lib" ] || fail "no $lib"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRV]$/ {print $3}' | sed 's/@.*//' | sort -u)
[ -n "$exported" ] || fail "$lib exports nothing"
others=$(grep -v '^sf_' <<<"$exported" || true)
[ -z "$others" ] || fail "$lib exports more than sf_*: $(head -5 <<<"$others" | tr '\n' ' ')"
# Every function the header declares (a line "TYPE sf_name(") is exported.
declared=$(grep -oE '\bsf_[a-z_]+\(' client/c/stagefrontier_c.h | tr -d '(' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
[ -z "$missing" ] || fail "declared but not exported: $missing"
echo "exports $(wc -l <<<"$exported") sf_* functions, all $(wc -l <<<"$declared") declared"

# The documented build: plain gcc, the header from the source tree, -lstagefrontier.
gcc -std=c11 -Wall -Wextra -Werror -I. client/examples/toy_loop.c -Lclient/c -lstagefrontier \
  -o "$tmp/toy_loop" || fail "gcc could not build the C example against $lib"
# Under --config=asan the library itself needs the sanitizer runtimes loaded first.
preload=()
if readelf -d "$lib" | grep 'libasan' >/dev/null; then
  preload=(LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
env "${preload[@]}" STAGEFRONTIER_SHM_DIR="$tmp" LD_LIBRARY_PATH=client/c "$tmp/toy_loop" 5 \
  >"$tmp/out.txt" 2>&1 || fail "the C example failed: $(cat "$tmp/out.txt")"
grep -q "C ABI v1: 5 steps" "$tmp/out.txt" || fail "unexpected output: $(cat "$tmp/out.txt")"
echo PASS
