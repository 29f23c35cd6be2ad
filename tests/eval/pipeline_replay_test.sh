#!/bin/bash
# pipeline_eval.py --replay on recorded pipeline journals: a live run's rows re-decided from the
# journals under its --work directory and scored as live (the right group and cell for a fault,
# HEALTHY for a healthy run); a row whose journal is missing is an error row, not a crash.
set -euo pipefail
SF=$1
here=$(dirname "$0")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$tmp/bin/daemon/analyze" "$tmp/work/data1"
cp "$SF" "$tmp/bin/daemon/analyze/stagefrontier"
cp "$here/recorded/session29_pipeline2x3_loss_sync_fwd_rank1_persistent.journal" "$tmp/work/data1/pe7.journal"
cp "$here/recorded/session30_pipeline2x2_loss_sync_healthy.journal" "$tmp/work/data1/pe20.journal"
cat > "$tmp/rows.jsonl" <<'ROWS'
{"index": 7, "job": "pe7", "shape": [2, 3], "micro": 2, "steps": 240, "stage": "fwd", "rank": 1, "fault_ms": 8.4, "pattern": "persistent", "every": 1, "start": 40, "stage_work_ms": null, "loss_sync": true}
{"index": 20, "job": "pe20", "shape": [2, 2], "micro": 2, "steps": 240, "stage": null, "pattern": "healthy", "stage_work_ms": null, "loss_sync": true}
ROWS
python3 "$here/pipeline_eval.py" --bin "$tmp/bin" --seed 20261190 --out "$tmp/rows.jsonl" \
  --replay "$tmp/work" --replay-out "$tmp/replayed.jsonl" > "$tmp/summary.txt"
cat "$tmp/summary.txt"
grep -qE '^all +1 +100\.0% +100\.0% +100\.0%.*\| +1 +100\.0%' "$tmp/summary.txt" || fail "summary"
grep -q '"sync_group": "pp0"' "$tmp/replayed.jsonl" || fail "the fault's group"
grep -q "error rows: 0" "$tmp/summary.txt" || fail "error rows"
# The faulty row carries what its marks show (fault_signal.py): fwd of rank 1 against ranks 0
# and 2, about the injected 8.4 ms a step.
python3 - "$tmp/replayed.jsonl" <<'PY' || fail "the fault's signal"
import json, sys
rows = {r["index"]: r for r in map(json.loads, open(sys.argv[1]))}
s = rows[7]["signal"]
assert 7.5 < s["gap_ms"] < 9.5 and s["z_run"] > 50 and s["z_verdict"] > 20, s
assert "signal" not in rows[20], rows[20]
PY
# The rows file is only read.
[ "$(wc -l < "$tmp/rows.jsonl")" -eq 2 ] || fail "rows file changed"
# A missing journal: an error row, scored as a miss.
rm "$tmp/work/data1/pe20.journal"
python3 "$here/pipeline_eval.py" --bin "$tmp/bin" --out "$tmp/rows.jsonl" --replay "$tmp/work" \
  > "$tmp/summary2.txt"
grep -q "row 20: no journal of pe20 under" "$tmp/summary2.txt" || fail "missing journal not said"
echo "pipeline replay ok"
