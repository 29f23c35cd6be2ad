#!/usr/bin/env bash
# The node sweep on this machine, judged by a real coordinator over gRPC: the first five
# sweeps (five node names) bootstrap the fleet baseline, the sixth is judged against it and
# passes; a node whose disk check cannot run fails (exit 1); without a GPU every GPU check
# says "skipped", never "pass"; and the baseline survives a coordinator restart.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/sweep" .
trap 'sf_stop_all' EXIT
sweep() { ./daemon/sweep/stagefrontier-sweep --coordinator "$SF_COORD" --quick "$@"; }

# This 2-core VM shares its cores with other tests and other VMs: a sweep on a busy moment
# measured 25% below the five before it (CI, three tries in a row). The fleet's floor is raised
# as an operator would for nodes that share their cores (--sweep-max-drop); the default 20%
# is unit-tested (fleet_baseline_test).
sf_start_coordinator 17371 17372 --sweep-max-drop 0.5 || sf_fail "coordinator"
for i in 1 2 3 4 5; do
  out=$(sweep --node "n$i" --checks cpu,gpu --json) || sf_fail "bootstrap sweep $i: $out"
  [ "$(jq -r '.judgement.checks[] | select(.name == "cpu_gflops") | .verdict' <<<"$out")" = bootstrap ] \
    || sf_fail "sweep $i should bootstrap: $out"
done
# The same machine passes against its own fleet figures. A sweep that lands on a busy moment
# (under ASan, two tests at once) measured 40% less, so the sixth node also gets three tries,
# as an operator would re-run a noisy sweep.
for attempt in 1 2 3; do
  sweep --node n6 --checks cpu,gpu >"$SF_WORK/n6.txt" && break
  echo "n6, try $attempt of 3 (a busy moment?):"
  cat "$SF_WORK/n6.txt"
done
cat "$SF_WORK/n6.txt"
grep -q "node n6: PASS" "$SF_WORK/n6.txt" || sf_fail "n6 should pass"
set +e
out=$(sweep --node n6 --checks cpu,gpu --json)
rc=$?
set -e
# Judged (pass or fail: the figure is this moment's), not an error.
[ $rc -le 1 ] || sf_fail "n6 again: exit $rc $out"
jq -e '.judgement.checks[] | select(.name == "cpu_gflops") | .verdict | test("^(pass|fail)$")' \
  <<<"$out" >/dev/null || sf_fail "cpu judged against 5+ fleet figures: $out"
# Only a sweep that passed joins the baseline: what the fleet holds now.
held=$(jq '(.judgement.checks[] | select(.name == "cpu_gflops") | .fleet_samples) +
  (if .judgement.passed then 1 else 0 end)' <<<"$out")
jq -e '.judgement.checks[] | select(.name == "cpu_gflops") | .fleet_samples >= 5' <<<"$out" >/dev/null \
  || sf_fail "fleet samples: $out"
# No GPU here: skipped with a reason, never passed.
[ "$(jq -r '[.judgement.checks[] | select(.name | startswith("gpu_") or startswith("nccl_")) | .verdict] | unique | join(",")' <<<"$out")" = skipped ] \
  || sf_fail "GPU checks must be skipped without a GPU: $out"

echo "== a --sweep-max-drop outside (0, 1) is a usage error"
set +e
"$SF_BIN/daemon/coordinator/stagefrontier-coordinator" --sweep-max-drop 1.5 \
  --data-dir "$SF_WORK/unused" >"$SF_WORK/usage.txt" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "sweep-max-drop: Value 1.5 not in range" "$SF_WORK/usage.txt" || sf_fail "usage: rc $rc $(cat "$SF_WORK/usage.txt")"

echo "== a check that cannot run fails the node"
set +e
sweep --node bad-disk --checks disk --scratch "$SF_WORK/no-such-dir" >"$SF_WORK/bad.txt" 2>&1
rc=$?
set -e
cat "$SF_WORK/bad.txt"
[ $rc = 1 ] || sf_fail "exit $rc, want 1"
grep -q "node bad-disk: FAIL" "$SF_WORK/bad.txt" || sf_fail "FAIL line"

echo "== without a coordinator: figures, not judged; all host checks measured"
./daemon/sweep/stagefrontier-sweep --quick --scratch "$SF_WORK" --node local | tee "$SF_WORK/local.txt"
grep -q "not judged" "$SF_WORK/local.txt" || sf_fail "local run"
for c in cpu_gflops memory_gbps disk_read_mbps loopback_gbps; do
  grep -Eq "^$c +[0-9.]+ .* measured" "$SF_WORK/local.txt" || sf_fail "$c not measured"
done

echo "== a sweep killed mid-run leaves nothing behind and reports nothing"
mkdir -p "$SF_WORK/killed"
./daemon/sweep/stagefrontier-sweep --coordinator "$SF_COORD" --node killed --checks disk \
  --scratch "$SF_WORK/killed" &
pid=$!
sleep 0.2
kill -KILL $pid
wait $pid 2>/dev/null || true
[ -z "$(ls -A "$SF_WORK/killed")" ] || sf_fail "the killed sweep left $(ls "$SF_WORK/killed")"

echo "== bad input: an unsafe node name is refused by the coordinator"
set +e
sweep --node 'bad name' --checks cpu >"$SF_WORK/badname.txt" 2>&1
rc=$?
set -e
[ $rc = 1 ] && grep -q "node name" "$SF_WORK/badname.txt" || sf_fail "bad name: rc $rc $(cat "$SF_WORK/badname.txt")"

echo "== the fleet baseline survives a restart"
sf_stop_all
sf_start_coordinator 17371 17372 --sweep-max-drop 0.5 || sf_fail "restart"
set +e
out=$(sweep --node n7 --checks cpu --json)
rc=$?
set -e
[ $rc -le 1 ] || sf_fail "after restart: exit $rc $out"
jq -e ".judgement.checks[0].fleet_samples == $held" <<<"$out" >/dev/null ||
  sf_fail "samples lost: $held held before the restart: $out"
echo "PASS: bootstrap, judged pass, failing check, GPU skipped, restart kept the baseline"
