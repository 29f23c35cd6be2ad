#!/usr/bin/env bash
# `SF_DEMO_HOLD=1 ./run.sh demo &` skipped the hold without a terminal and advised setting the
# variable already set. Without a terminal it now holds until out/demo/go-on appears (or
# SF_DEMO_HOLD seconds, when that is a number above 1).
set -euo pipefail
source deploy/demo/pipeline.sh
fail() { echo "FAIL: $*" >&2; exit 1; }
SF_WORK=${TEST_TMPDIR:-$(mktemp -d)}/hold
mkdir -p "$SF_WORK"

echo "== SF_DEMO_HOLD=1 without a terminal holds until go-on"
SF_DEMO_HOLD=1 sf_demo_hold http://x/ </dev/null >"$SF_WORK/out1" &
pid=$!
sleep 1
kill -0 "$pid" 2>/dev/null || fail "did not hold: $(cat "$SF_WORK/out1")"
grep -q "holding until 'touch $SF_WORK/go-on'" "$SF_WORK/out1" || fail "said: $(cat "$SF_WORK/out1")"
touch "$SF_WORK/go-on"
for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
kill -0 "$pid" 2>/dev/null && fail "go-on did not release it"
wait "$pid"
rm -f "$SF_WORK/go-on"

echo "== SF_DEMO_HOLD=2 holds 2 s at most"
SECONDS=0
SF_DEMO_HOLD=2 sf_demo_hold http://x/ </dev/null >"$SF_WORK/out2"
[ "$SECONDS" -ge 2 ] && [ "$SECONDS" -le 5 ] || fail "held $SECONDS s"
grep -q "or 2 s" "$SF_WORK/out2" || fail "said: $(cat "$SF_WORK/out2")"

echo "== unset: no hold, and the advice"
out=$(SF_DEMO_HOLD= sf_demo_hold http://x/ </dev/null)
[[ "$out" == *"SF_DEMO_HOLD=1 ./run.sh demo keeps it up"* ]] || fail "said: $out"
echo PASS
