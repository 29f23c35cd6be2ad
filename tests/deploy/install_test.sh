#!/usr/bin/env bash
# deploy/install.sh (what ./run.sh install runs after its build): the commands are copied into
# PREFIX/bin and run by name from PATH; the library and header land in lib/ and include/; a
# build tree that lacks a binary is refused with its name.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=${TEST_TMPDIR:-$(mktemp -d)}
prefix="$tmp/prefix"
out=$(deploy/install.sh "$PWD" "$prefix") || fail "install.sh: $out"
echo "$out"
for b in stagefrontier-coordinator stagefrontier-sidecar sfctl stagefrontier stagefrontier-sweep; do
  [ -x "$prefix/bin/$b" ] && [ ! -L "$prefix/bin/$b" ] || fail "$b not installed as a file"
done
[ -f "$prefix/lib/libstagefrontier.so" ] || fail "no lib/libstagefrontier.so"
[ -f "$prefix/include/stagefrontier_c.h" ] || fail "no include/stagefrontier_c.h"
# (Outputs captured before grep: `grep -q` closing the pipe early fails it under pipefail.)
help=$(PATH="$prefix/bin:$PATH" sfctl --help) || fail "sfctl --help from PATH"
[[ "$help" == *suspects* ]] || fail "sfctl --help: $help"
help=$(PATH="$prefix/bin:$PATH" stagefrontier-coordinator --help) || fail "coordinator --help"
[[ "$help" == *--data-dir* ]] || fail "stagefrontier-coordinator --help: $help"
rc=0
deploy/install.sh "$tmp/empty" "$tmp/p2" 2>"$tmp/err" || rc=$?
[ $rc = 1 ] && grep -q "stagefrontier-coordinator is missing" "$tmp/err" || fail "empty tree: $rc"
echo PASS
