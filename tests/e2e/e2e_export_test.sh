#!/usr/bin/env bash
# End to end: a real job of 8 synthetic trainers on 2 sidecars, rank 5's data loader slowed by
# 15 ms from step 30, exported with `sfctl export --format perfetto`. The trace must be valid
# Chrome trace JSON whose frontier slices sum, step by step, to the exposed time `sfctl steps`
# reports, with the verdict windows on their track (tests/e2e/validate_chrome_trace.py says
# rule by rule). Then --format chrome, --output, --ranks and the errors.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/e2e" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17461 17462 --step-deadline-ms 5000 --window-steps 50 --no-captures \
  || sf_fail "coordinator"
sf_start_sidecar node0
sf_start_sidecar node1
sf_run_trainers job1 8 2 200 --fault data:5:15 --fault-start 30 || sf_fail "trainers"
sf_wait_steps job1 200 30 || sf_fail "steps"

out="$SF_WORK/export"
mkdir -p "$out"
sf_ctl export --job job1 --from 20 --to 180 --format perfetto >"$out/job.json" \
  2>"$out/export.err" || sf_fail "export: $(cat "$out/export.err")"
sf_ctl --json steps --job job1 --from 20 --to 180 --limit 1000 >"$out/steps.json" || sf_fail "steps"
[ "$(jq '.steps | length' "$out/steps.json")" = 161 ] || sf_fail "steps held: $(head -c 300 "$out/steps.json")"
/usr/bin/python3 tests/e2e/validate_chrome_trace.py "$out/job.json" "$out/steps.json" --world 8 \
  --expect-suspect data:5 || sf_fail "the exported trace does not validate"

# --format chrome is the same document; --output writes it to a file, nothing on stdout.
sf_ctl export --job job1 --from 20 --to 180 --format chrome --output "$out/chrome.json" \
  >"$out/stdout" || sf_fail "export --format chrome --output"
[ ! -s "$out/stdout" ] || sf_fail "export --output printed on stdout"
cmp -s "$out/job.json" "$out/chrome.json" || sf_fail "--format chrome differs from perfetto"

# --ranks: only those ranks' tracks.
sf_ctl export --job job1 --from 100 --to 110 --ranks 5,0 >"$out/two.json" || sf_fail "--ranks"
[ "$(jq -c '[.traceEvents[] | select(.name == "thread_name") | .args.name | select(startswith("rank"))]' \
  "$out/two.json")" = '["rank 0","rank 5"]' ] || sf_fail "--ranks tracks"

# Errors: an unknown format (usage, exit 2), a range the coordinator does not hold, a rank
# outside the job (exit 1).
set +e
sf_ctl export --job job1 --format svg >/dev/null 2>"$out/err"; rc=$?
[ $rc = 2 ] && grep -q 'unknown export format "svg"' "$out/err" || sf_fail "bad format: rc $rc"
sf_ctl export --job job1 --from 100000 --to 100010 >/dev/null 2>"$out/err"; rc=$?
[ $rc = 1 ] && grep -q "holds no step in \[100000, 100010\]" "$out/err" || sf_fail "empty range: rc $rc"
sf_ctl export --job job1 --ranks 99 >/dev/null 2>"$out/err"; rc=$?
[ $rc = 1 ] && grep -q "rank 99 is outside world size 8" "$out/err" || sf_fail "bad rank: rc $rc"
sf_ctl export --job job1 --from 10 --to 5 >/dev/null 2>"$out/err"; rc=$?
[ $rc = 1 ] && grep -q "bad step range" "$out/err" || sf_fail "bad range: rc $rc"
set -e
echo "PASS"
