#!/usr/bin/env bash
# A node between jobs: its sidecar serves no rank, yet keeps one stream to the coordinator, and
# the coordinator ends a stream that delivers nothing for --idle-timeout-ms (it has no HTTP/2
# keepalive). The sidecar sends an empty health report at its max gap, which it keeps within
# half the idle timeout the coordinator says after the Hello (StreamLimits), so that such a
# stream is never cut. Regression (2026-11-28): a sidecar without ranks sent nothing, and its
# stream was ended, logged and counted as idle every minute (every 2 s here), then reconnected.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/idlesidecar" .
trap 'sf_stop_all' EXIT

sf_start_coordinator 17561 17562 --idle-timeout-ms 2000 || sf_fail "coordinator"
sf_start_sidecar idle0
sleep 8
cut=$(sf_metric 17562 'stagefrontier_ingest_streams_cut_total{reason="idle"}')
[ "${cut:-missing}" = 0 ] || sf_fail "the idle sidecar's stream was cut $cut times: $(
  grep 'ended' "$SF_WORK/coordinator.log" | sed -n 1,3p)"
connects=$(grep -c "sidecar idle0 .* connected" "$SF_WORK/coordinator.log" || true)
[ "$connects" = 1 ] || sf_fail "the sidecar connected $connects times"
# It said so: the max gap under half the idle timeout.
grep -q "ends a stream idle for 2000 ms: .* at least every 1000 ms" "$SF_WORK/sidecar-idle0.log" \
  || sf_fail "no capped max gap in the sidecar's log"
reports=$(sf_metric 17562 stagefrontier_ingest_health_reports_total)
echo "PASS: no rank, 8 s, idle timeout 2 s: 0 cuts, 1 connection, $reports empty health reports"
