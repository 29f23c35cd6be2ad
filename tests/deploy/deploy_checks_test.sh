#!/usr/bin/env bash
# Runs a coordinator, a sidecar and a 4-rank job so that every metric series exists, scrapes
# /metrics, collects the binaries' --help, then checks the deployment recipes and the docs
# against them (tests/deploy/check_deploy.py), and verifies the systemd units.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/deploy" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT
# Two ingest servers: stagefrontier_ingest_shard_streams exists only with more than one.
sf_start_coordinator 17361 17362 --window-steps 20 --ingest-shards 2
sf_start_sidecar node0
sf_run_trainers job1 4 1 60 --fault forward:1:5 --fault-start 10
sf_wait_steps job1 60 30
# The node gauges are refreshed once a second: wait for the first charged window's series
# rather than race them (a scrape right after step 60 could precede it).
for _ in $(seq 50); do
  curl -sf http://127.0.0.1:17362/metrics >"$SF_WORK/metrics.txt"
  grep -q '^stagefrontier_node_class' "$SF_WORK/metrics.txt" && break
  sleep 0.2
done
mkdir -p "$SF_WORK/help"
./daemon/coordinator/stagefrontier-coordinator --help >"$SF_WORK/help/coordinator.txt"
./daemon/sidecar/stagefrontier-sidecar --help >"$SF_WORK/help/sidecar.txt"
./daemon/sfctl/sfctl --help >"$SF_WORK/help/sfctl.txt"
./daemon/sweep/stagefrontier-sweep --help >"$SF_WORK/help/sweep.txt"
for sub in suspects steps watch health control selftest nodes capture captures capture-report \
  capture-fetch export; do
  ./daemon/sfctl/sfctl "$sub" --help >"$SF_WORK/help/sfctl-$sub.txt"
done
/usr/bin/python3 tests/deploy/check_deploy.py "$SF_WORK/metrics.txt" "$SF_WORK/help"

# systemd: the units verify, with ExecStart pointed at the binaries built here.
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$SF_WORK/units"
  for u in sidecar coordinator; do
    sed "s|/usr/bin/stagefrontier-$u|$PWD/daemon/$u/stagefrontier-$u|" \
      "deploy/systemd/stagefrontier-$u.service" >"$SF_WORK/units/stagefrontier-$u.service"
  done
  systemd-analyze verify "$SF_WORK"/units/*.service
  echo "systemd units verified"
else
  echo "systemd-analyze not installed: units not verified (deploy/install-deps.sh installs systemd)"
fi
echo PASS
