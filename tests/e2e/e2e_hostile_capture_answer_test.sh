#!/usr/bin/env bash
# A slot is the trainer's user's to write. A capture answer in it goes to the coordinator at
# once (the next request's answer may replace it), so a trainer that flips its answer at every
# poll of the sidecar (1-10 ms) made the sidecar send its node's whole health report each time:
# hundreds of messages a second from one node. The sidecar now sends such answers at most
# every 100 ms (health_cadence.h urgent_every_ns). Regression (2026-11-28): 3 s of flipping
# (5,115 flips) cost the coordinator 511 health reports from this one node; now 31.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/hostilecapture" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17571 17572 || sf_fail "coordinator"
sf_start_sidecar node0
sf_spawn_trainers hc 1 1 3000 --stage-ms data=1,forward=1,backward=1,optimizer=1
sf_wait_steps hc 50 20 || sf_fail "job hc did not start"
seg="$SF_WORK/shm-node0/stagefrontier.hc.seg"
[ -f "$seg" ] || sf_fail "no segment at $seg"
health() { sf_metric 17572 stagefrontier_ingest_health_reports_total; }
h0=$(health)
# Slot 0's capture_state (offset 4096 + 1824, docs/segment-format.md), 1 and 2 in turn for 3 s.
env -u LD_PRELOAD /usr/bin/python3 - "$seg" <<'PY'
import mmap, os, struct, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0)
off = 4096 + 1824
end = time.monotonic() + 3
i = 0
while time.monotonic() < end:
    m[off:off + 4] = struct.pack("<I", 1 + i % 2)
    i += 1
    time.sleep(0.0005)
print(f"flipped capture_state {i} times in 3 s")
PY
h1=$(health)
n=$((h1 - h0))
echo "health reports during 3 s of flipping: $n"
# 10 a second at most from the answers, plus the regular cadence's few.
[ "$n" -le 40 ] || sf_fail "$n health reports in 3 s of a flipping capture answer"
[ "$n" -ge 10 ] || sf_fail "only $n health reports: the answers did not go out at once"
sf_wait_trainers || sf_fail "trainers"
echo "PASS: a flipping capture answer cost $n health reports in 3 s"
