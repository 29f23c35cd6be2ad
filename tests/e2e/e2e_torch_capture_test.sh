#!/usr/bin/env bash
# Profiler captures through the real pipeline: real PyTorch DDP (3 Gloo ranks under torchrun
# and `-m stagefrontier.torch.run`, no profiling flags in the script), rank 1's forward doing
# extra matrix products.
# 1. Automatic: the coordinator runs with --captures; its first window is CLEAR on rank 1, so
#    it asks rank 1 and two reference ranks (0 and 2) for the same 5 future steps.
# 2. By hand: `sfctl capture --ranks 0,1,2 --steps 5`, through the same policy (refused while
#    a capture is in flight; `sfctl captures` lists both).
# Each rank's stagefrontier.torch runs torch.profiler for exactly those steps and writes
# <job>/trace_rank<R>_step<A>.json into STAGEFRONTIER_CAPTURE_DIR; the sidecar sends each
# finished file to the coordinator, which stores it under --data-dir/captures/<job>/ (byte for
# byte), compares the suspect's with the references' and writes a report (`sfctl
# capture-report`) whose first three findings must hold a matrix product on rank 1, a culprit,
# as must `stagefrontier compare-ops` on each set; `sfctl capture-fetch` gets the files back.
# Each rank's stub answers done with the trace's size (`sfctl captures`). Requests for a rank
# outside the job are refused.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_torch_env
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/capture" .
trap 'sf_stop_all; kill $TORCHRUN 2>/dev/null || true' EXIT
SF=daemon/analyze/stagefrontier
captures="$SF_WORK/captures"
local_files="$captures/capture"            # the trainers' folder for job "capture"
stored="$SF_WORK/data/captures/capture"    # what the coordinator holds
# top3_culprits REGEX REPORT_JSON: how many of the report's first three findings are culprits
# whose call path matches REGEX.
top3_culprits() {
  jq --arg p "$1" '[.findings[:3][] | select(.role == "culprit" and (.path | test($p)))] | length' \
    <<<"$2"
}
matmul='aten::(mm|matmul)$'
mixer='nn\.Module: mixer \(Mixer\)'

# (A long cooldown, so that no third capture replaces the hand-asked window in the slots.)
sf_start_coordinator 17391 17392 --step-deadline-ms 10000 --captures \
  --capture-cooldown-windows 1000 || sf_fail "coordinator"
sf_start_sidecar node0 --capture-dir "$captures"
mkdir -p "$SF_WORK/shm-node0"
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" STAGEFRONTIER_CAPTURE_DIR="$captures" \
  OMP_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.run --nproc_per_node 3 \
  --master_port 29641 --rdzv_id capture --redirects 2 --tee 1 \
  --log_dir "$SF_WORK/torchrun-logs" -m stagefrontier.torch.run client/examples/ddp_example.py \
  --steps 1200 --fault matmul:1:6 >"$SF_WORK/torchrun.log" 2>&1 &
TORCHRUN=$!
sf_wait_steps capture 120 60 || sf_fail "no steps"
# The coordinator says which capture it asked for, and why.
for ((i = 0; i < 300; i++)); do
  auto=$(grep -Eo "capture 1 of job capture: [A-Z_ ]+ on ranks? ([0-9]+, )*1(, [0-9]+)*: steps [0-9]+" \
    "$SF_WORK/coordinator.log" || true)
  [ -n "$auto" ] && break
  sleep 0.1
done
grep "capture" "$SF_WORK/coordinator.log" || true
[ -n "$auto" ] || sf_fail "no automatic capture of rank 1 asked"
auto_first=${auto##* }
echo "== by hand: sfctl capture --ranks 0,1,2 (through the policy: after capture 1 is done)"
for ((i = 0; i < 100; i++)); do
  set +e
  reply=$(sf_ctl --json capture --job capture --ranks 0,1,2 --steps 5 2>&1)
  rc=$?
  # A second request at once, refused while capture 2 is in flight. That lasts only until its
  # ranks answer done: about 1.4 s at this job's 13 steps/s (a lead of 13 steps, then 5), the
  # answers relayed at once while the steps' records are held up to 8 steps. Anything run
  # between the two requests (an sfctl under ASan takes about 0.5 s) eats into it.
  [ $rc = 0 ] && out=$(sf_ctl capture --job capture --ranks 0 2>&1) && second_rc=0 ||
    second_rc=$?
  set -e
  [ $rc = 0 ] && break
  grep -q "is in flight" <<<"$reply" || sf_fail "sfctl capture: $reply"
  sleep 0.2
done
[ $rc = 0 ] || sf_fail "capture 1 stayed in flight: $reply"
echo "$reply"
first=$(jq -r .message <<<"$reply" | grep -Eo 'steps [0-9]+' | grep -Eo '[0-9]+')
[ -n "$first" ] || sf_fail "no first step in: $reply"
[ "$second_rc" != 0 ] && grep -q "is in flight" <<<"$out" ||
  sf_fail "a second capture was not refused: $out"
set +e
out=$(sf_ctl capture --job capture --ranks 7 2>&1)
rc=$?
set -e
[ $rc != 0 ] && grep -q "rank 7 is not a rank of job capture" <<<"$out" || sf_fail "rank 7: $out"
set +e
out=$(sf_ctl control --job capture --trace-rank 7 --trace-steps "1:2" 2>&1)
rc=$?
set -e
[ $rc != 0 ] && grep -q "rank 7 is outside world size 3" <<<"$out" || sf_fail "rank 7: $rc $out"
listed=$(sf_ctl captures --job capture)
echo "$listed"
grep -q "automatic captures on" <<<"$listed" || sf_fail "captures: $listed"
grep -q "capture 1: .* on rank 1: steps $auto_first" <<<"$listed" || sf_fail "capture 1 not listed"
grep -q "capture 2 (by hand): asked by hand: ranks 0, 1, 2, steps $first" <<<"$listed" \
  || sf_fail "capture 2 not listed"

wait $TORCHRUN || sf_fail "torchrun"
ls -la "$local_files"
[ -z "$(ls "$local_files" | grep -Ev '^trace_rank[0-2]_step[0-9]*\.json(\.uploaded)?$' || true)" ] \
  || sf_fail "stray files in the capture directory"
for f in "$auto_first" "$first"; do
  echo "== the capture of steps $f.."
  for r in 0 1 2; do
    [ -s "$local_files/trace_rank${r}_step${f}.json" ] || sf_fail "no capture from rank $r at $f"
    # Collected: the sidecar passes every second.
    for ((i = 0; i < 200; i++)); do
      [ -e "$local_files/trace_rank${r}_step${f}.json.uploaded" ] && break
      sleep 0.1
    done
    cmp "$local_files/trace_rank${r}_step${f}.json" "$stored/trace_rank${r}_step${f}.json" \
      || sf_fail "rank $r's capture at $f was not stored by the coordinator as written"
  done
  # Each rank says so on its stderr (torchrun keeps it under --log_dir).
  said=$(cat "$SF_WORK"/torchrun-logs/*/attempt_0/*/stderr.log |
    grep -c "captured steps $f..$((f + 4)) of rank" || true)
  [ "$said" = 3 ] || sf_fail "$said of 3 ranks said they captured steps $f.."
  "$SF" compare-ops --stage forward --suspect "$stored/trace_rank1_step$f.json" \
    "$stored/trace_rank0_step$f.json" "$stored/trace_rank2_step$f.json"
  out=$("$SF" compare-ops --json --stage forward --suspect "$stored/trace_rank1_step$f.json" \
    "$stored/trace_rank0_step$f.json" "$stored/trace_rank2_step$f.json")
  [ "$(jq -r .suspect_steps <<<"$out")" = 5 ] || sf_fail "captured steps: $out"
  # The issue's bar: the injected operator among the first three findings, a culprit, named
  # with the module it ran in (the capture's module ranges).
  [ "$(top3_culprits "$matmul" "$out")" -ge 1 ] \
    || sf_fail "no matmul culprit in the first three: $out"
  [ "$(top3_culprits "$mixer" "$out")" -ge 1 ] \
    || sf_fail "no culprit in the mixer module in the first three: $out"
done
# The coordinator's own report of each capture, written once the three files arrived: the
# automatic one (rank 1 against 0 and 2, in the verdict's stage) and the one asked by hand
# (rank 1 named by the last verdict, so rank 1 against the others).
for id in 1 2; do
  sf_ctl capture-report --job capture --capture $id --wait 60 || sf_fail "capture $id: no report"
  report=$(sf_ctl --json capture-report --job capture --capture $id)
  [ "$(jq -r .state <<<"$report")" = analysed ] || sf_fail "capture $id: $report"
  findings=$(jq -r .report_json <<<"$report" | jq '.reports[0]')
  [ "$(jq -r .suspect_rank <<<"$findings")" = 1 ] || sf_fail "capture $id: suspect: $findings"
  [ "$(top3_culprits "$matmul" "$findings")" -ge 1 ] \
    || sf_fail "capture $id: no matmul culprit in the report's first three: $findings"
  [ "$(top3_culprits "$mixer" "$findings")" -ge 1 ] \
    || sf_fail "capture $id: no culprit in the mixer module in the report's first three: $findings"
done
# Each rank's profiler answered done, with the size of the trace it wrote (the stub's answer,
# relayed by the sidecar's health reports).
listed=$(sf_ctl captures --job capture)
echo "$listed"
for f in "$auto_first" "$first"; do
  for r in 0 1 2; do
    size=$(stat -c %s "$local_files/trace_rank${r}_step${f}.json")
    grep -q "rank $r done ($size bytes)" <<<"$listed" \
      || sf_fail "rank $r's answer for steps $f.. ($size bytes) not listed"
  done
done
answers=$(sf_ctl --json captures --job capture | jq -c '[.decisions[] | select(.asked) | .answers[] | .state]')
[ "$answers" = '["done","done","done","done","done","done"]' ] || sf_fail "answers: $answers"
# The files, back from the coordinator as they were written.
mkdir -p "$SF_WORK/fetched"
sf_ctl capture-fetch --job capture --capture 1 --out "$SF_WORK/fetched" || sf_fail "capture-fetch"
for r in 0 1 2; do
  cmp "$SF_WORK/fetched/trace_rank${r}_step$auto_first.json" \
    "$local_files/trace_rank${r}_step$auto_first.json" || sf_fail "fetched rank $r differs"
done
set +e
out=$(sf_ctl capture-report --job capture --capture 99 2>&1)
rc=$?
set -e
[ $rc = 1 ] && grep -q "no capture 99 of job capture" <<<"$out" || sf_fail "capture 99: $rc $out"
# /metrics: the ticker brings the capture counters up every second.
for ((i = 0; i < 50; i++)); do
  m=$(sf_metrics 17392 || true)
  grep -q '^stagefrontier_capture_files_stored_total 6$' <<<"$m" &&
    grep -q '^stagefrontier_capture_reports_total{result="analysed"} 2$' <<<"$m" &&
    grep -q '^stagefrontier_capture_rank_answers_total{state="done"} 6$' <<<"$m" && break
  sleep 0.2
done
grep '^stagefrontier_capture' <<<"$m" || true
if [ -z "$m" ]; then  # what the connections and the coordinator's threads were doing
  ss -tanp 2>/dev/null | grep ':17392' >&2 || true
  for t in /proc/"$SF_COORD_PID"/task/*; do
    echo "thread $(cat "$t/comm"): $(awk '{print $3}' "$t/stat") $(cat "$t/wchan")" >&2
  done
fi
grep -q '^stagefrontier_captures_asked_total 2$' <<<"$m" || sf_fail "/metrics: captures asked"
grep -q '^stagefrontier_capture_files_stored_total 6$' <<<"$m" || sf_fail "/metrics: files stored"
grep -q '^stagefrontier_capture_reports_total{result="analysed"} 2$' <<<"$m" \
  || sf_fail "/metrics: reports"
grep -q '^stagefrontier_capture_rank_answers_total{state="done"} 6$' <<<"$m" \
  || sf_fail "/metrics: rank answers"
grep -E "capture [0-9]+ of job capture" "$SF_WORK/coordinator.log"  # the verdict-to-report times
sf_stop_all  # the sidecar's counts come with its last words
grep "captures:" "$SF_WORK/sidecar-node0.log" || true
grep -q "captures: 6 files sent" "$SF_WORK/sidecar-node0.log" || sf_fail "sidecar's capture counts"
echo PASS
