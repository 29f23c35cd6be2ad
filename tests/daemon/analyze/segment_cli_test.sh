#!/usr/bin/env bash
# End to end through real processes: the C++ toy trainer marks its stages into a segment,
# `stagefrontier segment` shows the slots and drains them into a run that `analyze` accepts;
# a damaged segment gets a clear error and exit 2.
set -euo pipefail
TOY=$1
SF=$2
TOY_C=$3
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/segXXXXXX")
fail() { echo "FAIL: $*" >&2; exit 1; }

for r in 0 1 2; do
  STAGEFRONTIER_SHM_DIR=$tmp TORCHELASTIC_RUN_ID=cli RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 \
    LOCAL_WORLD_SIZE=3 "$TOY" --steps 12 --data-us 100 > "$tmp/toy$r.txt" &
done
wait
grep -q "rank 1: 12 steps, 12 recorded" "$tmp/toy1.txt" || fail "toy output: $(cat "$tmp/toy1.txt")"
seg=$tmp/stagefrontier.cli.seg

"$SF" segment "$seg" > "$tmp/show.txt"
grep -q "job cli, layout v2, 8 slots x 1024 records, probe rings of 256," "$tmp/show.txt" || fail "header: $(cat "$tmp/show.txt")"
grep -q "local rank 2: released, rank 2/3" "$tmp/show.txt" || fail "slot 2 missing"
grep -q "pending 12, read 0, dropped by writer 0, torn 0, invalid 0" "$tmp/show.txt" || fail "counters"
grep -q "schema data:io,forward:compute,backward:compute,grad_sync:sync,optimizer:compute" \
  "$tmp/show.txt" || fail "schema not shown: $(cat "$tmp/show.txt")"
# Each slot's open stage: the toy ended its last step (11) and released the slot.
grep -q "    last seen: between steps (after step 11), for " "$tmp/show.txt" \
  || fail "open stage not shown: $(cat "$tmp/show.txt")"

"$SF" segment "$seg" --json --drain "$tmp/run.jsonl" > "$tmp/drain.json"
grep -q '"drained": 36' "$tmp/drain.json" || fail "drained: $(head -20 "$tmp/drain.json")"
[ "$(wc -l < "$tmp/run.jsonl")" -eq 36 ] || fail "run has $(wc -l < "$tmp/run.jsonl") lines"
"$SF" segment "$seg" | grep "pending 0, read 0" >/dev/null || fail "records not consumed"
"$SF" analyze "$tmp/run.jsonl" > "$tmp/report.txt" || fail "analyze refused the drained run"
grep -q '^VERDICT' "$tmp/report.txt" || fail "no verdict"

# A segment of a newer layout version is refused, nothing on stdout, exit 2.
cp "$seg" "$tmp/stagefrontier.v3.seg"
printf '\x03' | dd of="$tmp/stagefrontier.v3.seg" bs=1 seek=8 conv=notrunc 2>/dev/null
set +e
"$SF" segment "$tmp/stagefrontier.v3.seg" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "exit $rc for a v3 segment"
[ ! -s "$tmp/out.txt" ] || fail "stdout not empty"
grep -q "segment layout version 3 is newer than the versions this build knows" "$tmp/err.txt" \
  || fail "message: $(cat "$tmp/err.txt")"
set +e
"$SF" segment "$tmp/none.seg" 2> "$tmp/err.txt"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "exit $rc for a missing segment"
grep -q "No such file" "$tmp/err.txt" || fail "missing-file message: $(cat "$tmp/err.txt")"
# The C example, through the C ABI, in a job of its own.
out=$(STAGEFRONTIER_SHM_DIR=$tmp STAGEFRONTIER_JOB_ID=cjob "$TOY_C" 5)
[ "$out" = "C ABI v1: 5 steps, 5 recorded, 0 not recorded" ] || fail "C example: $out"
"$SF" segment "$tmp/stagefrontier.cjob.seg" | grep "schema data:io,compute:compute,allreduce:sync" >/dev/null \
  || fail "C example's schema"
echo "segment_cli_test: all checks passed"
