#!/usr/bin/env bash
# The coordinator's web view (--http-listen) in a real browser: headless Chromium driven by
# Selenium loads the page of a live faulty job (8 ranks on 2 nodes, rank 5's data loader slow)
# and must show the CLEAR verdict on (data, 5), the heatmap's hottest cell there, the frontier
# stacks equal to each step's exposed time, every rank's health and the capture decisions.
# Without the token the page asks for one. Screenshots are test outputs
# (bazel-testlogs/tests/e2e/e2e_web_view_test/test.outputs/).
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/web" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT
for tool in /usr/bin/chromium /usr/bin/chromedriver; do
  [ -x "$tool" ] || sf_fail "$tool is not installed (deploy/install-deps.sh installs it)"
done
out=${TEST_UNDECLARED_OUTPUTS_DIR:-$SF_WORK/screenshots}
mkdir -p "$out"
echo "web-secret" >"$SF_WORK/token"
SF_CTL_FLAGS=(--token-file "$SF_WORK/token")

sf_start_coordinator 17451 17452 --token-file "$SF_WORK/token" --http-listen 127.0.0.1:17453 \
  --window-steps 50 || sf_fail "coordinator"
grep -q "web view on http://127.0.0.1:17453" "$SF_WORK/coordinator.log" || sf_fail "no web view"
sf_start_sidecar node0 --token-file "$SF_WORK/token"
sf_start_sidecar node1 --token-file "$SF_WORK/token"
sf_run_trainers web 8 2 300 --stage-ms data=2,forward=3,backward=3,optimizer=1 \
  --fault data:5:10 --fault-start 40 --capture-callbacks || sf_fail "trainers"
sf_wait_steps web 300 30 || sf_fail "steps"
sf_ctl suspects --job web

/usr/bin/python3 tests/e2e/web_view_check.py http://127.0.0.1:17453 web web-secret data 5 8 \
  "$out" || sf_fail "the browser check"
ls "$out"/web_view_job.png "$out"/web_view_token.png >/dev/null || sf_fail "no screenshots"
# The browser's requests are counted on /metrics (updated once a second).
for i in $(seq 30); do
  n=$(sf_metric 17452 stagefrontier_web_requests_total)
  [ "${n:-0}" -gt 10 ] && break
  sleep 0.2
done
[ "${n:-0}" -gt 10 ] || sf_fail "stagefrontier_web_requests_total is ${n:-missing}"
echo PASS
