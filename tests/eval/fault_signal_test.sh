#!/bin/bash
# fault_signal.py on recorded pipeline journals: a persistent 8.4 ms fwd fault stands out of its
# role peers by about that much a step, a healthy run's same cell does not; bad arguments and a
# stage the journal lacks are refused with a message.
set -euo pipefail
SF=$1
here=$(dirname "$0")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*" >&2; exit 1; }
faulty="$here/recorded/session29_pipeline2x3_loss_sync_fwd_rank1_persistent.journal"
healthy="$here/recorded/session30_pipeline2x3_loss_sync_healthy.journal"
sig() { python3 "$here/fault_signal.py" --bin "$SF" "$@"; }
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['$1'])"; }

sig "$faulty" --rank 1 --peers 0,2 --stage fwd --start 40 > "$tmp/faulty.txt"
cat "$tmp/faulty.txt"
gap=$(field gap_ms < "$tmp/faulty.txt")
z=$(field z_run < "$tmp/faulty.txt")
python3 -c "import sys; sys.exit(not (7.5 < $gap < 9.5 and $z > 50))" || fail "faulty gap $gap z $z"
[ "$(field steps < "$tmp/faulty.txt")" -eq 200 ] || fail "faulty steps"
# Its peers against each other: nothing.
sig "$faulty" --rank 0 --peers 2 --stage fwd --start 40 > "$tmp/peer.txt"
z=$(field z_run < "$tmp/peer.txt")
python3 -c "import sys; sys.exit(not abs($z) < 4)" || fail "peer z $z"

sig "$healthy" --rank 1 --peers 0,2 --stage fwd --start 40 > "$tmp/healthy.txt"
cat "$tmp/healthy.txt"
z=$(field z_run < "$tmp/healthy.txt")
python3 -c "import sys; sys.exit(not abs($z) < 4)" || fail "healthy z $z"

if sig "$faulty" --rank 1 --peers 0,2 --stage nosuch 2> "$tmp/err.txt"; then fail "unknown stage"; fi
grep -q "stage 'nosuch' is not in the journal's schema" "$tmp/err.txt" || fail "unknown stage message"
if sig "$faulty" --rank 1 --peers 1 --stage fwd 2> "$tmp/err.txt"; then fail "rank among peers"; fi
grep -q "peers: one or more ranks other than --rank" "$tmp/err.txt" || fail "peers message"
if sig "$faulty" --rank 1 --peers 0 --stage fwd --start 100000 2> "$tmp/err.txt"; then
  fail "no steps"
fi
grep -q "no step >= 100000" "$tmp/err.txt" || fail "no steps message"
if sig "$tmp/absent.journal" --rank 1 --peers 0 --stage fwd 2> "$tmp/err.txt"; then
  fail "missing journal"
fi
grep -q "fault_signal: .* journal .*absent.journal" "$tmp/err.txt" || fail "missing journal message"
echo "fault signal ok"
