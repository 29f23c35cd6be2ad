#!/usr/bin/env bash
# A misspelt flag or command is named (with the nearest known one), exit 2, before anything
# connects: `sfctl suspects --jbo x` used to say "--job is required", `sfctl suspect` "A
# subcommand is required", the coordinator's `--data-dri /x` "--data-dir is required".
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
SFCTL=daemon/sfctl/sfctl
COORD=daemon/coordinator/stagefrontier-coordinator
tmp=${TEST_TMPDIR:-$(mktemp -d)}

# expect WANT CMD...: CMD exits 2 and its standard error holds WANT.
expect() {
  local want=$1 rc=0
  shift
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ $rc = 2 ] || fail "$*: exit $rc, want 2: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$*: said $(cat "$tmp/err"), want: $want"
}
expect "unknown flag --jbo of suspects (did you mean --job?)" "$SFCTL" suspects --jbo x
expect 'unknown command "suspect" (did you mean suspects?)' "$SFCTL" suspect
expect "unknown flag --data-dri (did you mean --data-dir?)" "$COORD" --data-dri /x
expect "port 99999 is outside 0..65535" "$COORD" --data-dir "$tmp/d" --listen 127.0.0.1:99999
expect "is not HOST:PORT" "$COORD" --data-dir "$tmp/d" --metrics-listen 7312
expect "an address is needed" "$SFCTL" --coordinator "" jobs
# sfctl pointed at an HTTP/1 port (the coordinator's /metrics or web view) says so, exit 3,
# instead of gRPC's transport words.
/usr/bin/python3 -m http.server --bind 127.0.0.1 17491 >/dev/null 2>&1 &
http=$!
trap 'kill $http 2>/dev/null || true' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/17491) 2>/dev/null && break; sleep 0.1; done
rc=0
"$SFCTL" --coordinator 127.0.0.1:17491 --timeout 5 jobs >/dev/null 2>"$tmp/err" || rc=$?
[ $rc = 3 ] && grep -q "answers plain HTTP, not gRPC: is it the coordinator's /metrics or web" \
  "$tmp/err" || fail "HTTP port: exit $rc: $(cat "$tmp/err")"
# A correct line still reaches the usual checks.
expect "--job is required" "$SFCTL" suspects
echo PASS
