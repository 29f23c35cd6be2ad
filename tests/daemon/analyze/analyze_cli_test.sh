#!/usr/bin/env bash
# End to end: stagefrontier-sim writes a run, stagefrontier analyze reports on it; bad input
# gets a clear error naming the line, exit 2 and nothing on stdout.
set -euo pipefail
SIM=$1
SF=$2
JOURNAL=$3          # an intact coordinator journal
DAMAGED_JOURNAL=$4  # one with damaged bytes in the middle
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*" >&2; exit 1; }

"$SIM" --ranks 16 --steps 300 --seed 3 --clock-skew --fault slow:data:rank=11:magnitude=30ms:start=100 \
  --out "$tmp/run.jsonl" --truth "$tmp/truth.json"
[ "$(wc -l < "$tmp/run.jsonl")" -eq 4800 ] || fail "expected 4800 records"
grep -q '"rank": 11' "$tmp/truth.json" || fail "truth lacks the injected rank"

"$SF" analyze "$tmp/run.jsonl" > "$tmp/report.txt"
grep -q '^VERDICT  CLEAR' "$tmp/report.txt" || fail "no CLEAR verdict: $(head -5 "$tmp/report.txt")"
grep -qE '^ +1  data +11 ' "$tmp/report.txt" || fail "top suspect is not (data, 11)"
grep -q 'mean dashboard -> grad_sync' "$tmp/report.txt" || fail "mean dashboard misreading not shown"

"$SF" analyze --json "$tmp/run.jsonl" > "$tmp/report.json"
grep -q '"label": "CLEAR"' "$tmp/report.json" || fail "json label"
grep -q '"stage": "data",' "$tmp/report.json" || fail "json stage"

# Bad input: a truncated last line.
head -c -40 "$tmp/run.jsonl" > "$tmp/bad.jsonl"
set +e
"$SF" analyze "$tmp/bad.jsonl" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "exit code $rc for a truncated file"
[ ! -s "$tmp/out.txt" ] || fail "something was printed for a bad file"
grep -q 'line 4800: not valid JSON' "$tmp/err.txt" || fail "error does not name the line: $(cat "$tmp/err.txt")"

# A missing file and a bad flag.
set +e
"$SF" analyze "$tmp/nope.jsonl" 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q 'cannot open' "$tmp/err.txt" || fail "missing file: rc $rc"
set +e
"$SIM" --ranks 4 --fault slow:grad_sync:rank=1:magnitude=5ms > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q 'is a sync stage' "$tmp/err.txt" || fail "sim accepted a slow sync stage: rc $rc"
# A coordinator journal replayed offline: read, never changed; damage is skipped and said.
sum_before=$(md5sum < "$DAMAGED_JOURNAL")
"$SF" journal "$JOURNAL" > "$tmp/journal.txt" || fail "journal replay failed"
grep -q '^VERDICT ' "$tmp/journal.txt" || fail "journal replay has no verdict"
grep -q '^journal: .* rank-steps of 12 steps' "$tmp/journal.txt" || fail "journal summary"
"$SF" journal "$DAMAGED_JOURNAL" > "$tmp/damaged.txt" || fail "damaged journal replay failed"
grep -q 'skipped .* damaged bytes at offset' "$tmp/damaged.txt" || fail "damage not reported"
[ "$(md5sum < "$DAMAGED_JOURNAL")" = "$sum_before" ] || fail "replay changed the journal"
"$SF" journal --json "$JOURNAL" > "$tmp/journal.json"
grep -q '"group_wide": ' "$tmp/journal.json" || fail "json verdict lacks group_wide"
"$SF" journal "$JOURNAL" --out "$tmp/replayed.jsonl" > /dev/null
"$SF" analyze "$tmp/replayed.jsonl" > /dev/null || fail "exported run does not analyze"
set +e
"$SF" journal "$tmp/run.jsonl" > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q 'not a StageFrontier journal' "$tmp/err.txt" || fail "non-journal: rc $rc"
# A journal compacted into record blocks: the same report, the original untouched; damaged
# journals and an existing output are refused with exit 2 and the reason.
sum_before=$(md5sum < "$JOURNAL")
"$SF" journal-compact "$JOURNAL" --out "$tmp/compact.journal" --block-steps 5 > "$tmp/compact.txt" \
  || fail "journal-compact failed"
grep -q 'read back and compared: the same records' "$tmp/compact.txt" || fail "compact output"
[ "$(md5sum < "$JOURNAL")" = "$sum_before" ] || fail "compaction changed the original"
"$SF" journal "$tmp/compact.journal" | tail -n +2 > "$tmp/compact_report.txt"
"$SF" journal "$JOURNAL" | tail -n +2 > "$tmp/plain_report.txt"
diff "$tmp/plain_report.txt" "$tmp/compact_report.txt" || fail "the compacted journal accounts differently"
"$SF" journal-compact --json --block-steps 5 "$JOURNAL" --out "$tmp/compact2.journal" | jq -e '.blocks == 3 and .output_bytes < .input_bytes' >/dev/null \
  || fail "compact --json"
"$SF" journal-compact --round-us "$JOURNAL" --out "$tmp/us.journal" > "$tmp/us.txt" || fail "--round-us"
grep -q 'the same records, durations rounded to 1000 ns' "$tmp/us.txt" || fail "--round-us output"
[ "$(stat -c %s "$tmp/us.journal")" -lt "$(stat -c %s "$tmp/compact.journal")" ] || fail "--round-us size"
"$SF" journal "$tmp/us.journal" | grep '^VERDICT ' >/dev/null || fail "the microsecond archive does not account"
set +e
"$SF" journal-compact "$JOURNAL" --out "$tmp/compact.journal" > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q 'exists' "$tmp/err.txt" || fail "existing output: rc $rc $(cat "$tmp/err.txt")"
set +e
"$SF" journal-compact "$DAMAGED_JOURNAL" --out "$tmp/damaged_compact.journal" > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q 'damaged bytes' "$tmp/err.txt" || fail "damaged: rc $rc $(cat "$tmp/err.txt")"
[ ! -e "$tmp/damaged_compact.journal" ] || fail "a refused compaction wrote a file"

# Regression (issue 28, attack 3): a trace whose pid nests 200,000 arrays crashed compare-ops
# (and the coordinator's analysis) by recursion. Refused with the limit named, exit 2.
python3 -c "
d = '[' * 200000 + ']' * 200000
print('{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":' + d + ',\"tid\":1}]}')
" > "$tmp/trace_rank1.json"
printf '{"traceEvents": []}' > "$tmp/trace_rank0.json"
set +e
"$SF" compare-ops --stage forward --suspect "$tmp/trace_rank1.json" "$tmp/trace_rank0.json" \
  > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q 'nested deeper than 64' "$tmp/err.txt" \
  || fail "deep trace: rc $rc $(cat "$tmp/err.txt")"
echo PASS
