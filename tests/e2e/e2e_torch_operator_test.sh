#!/usr/bin/env bash
# Down to the operator: real PyTorch DDP (3 Gloo ranks under torchrun, instrumented with
# `-m stagefrontier.torch.run --annotate`, torch.profiler over 10 steps), with two faults a
# user meets: rank 1's model does extra matrix products in its forward (an operator-level
# fault: no sleep), rank 2's data loader is slower (time in Python, in no profiled operator of
# its own). `stagefrontier compare-ops` compares the suspect's trace with the other ranks':
# inside `forward` it must name a matrix product on rank 1 as the culprit, inside `data` the
# DataLoader's next() on rank 2 by its own time (a culprit, between two of its operators); a
# rank compared with its peers in a stage where nothing was injected must give no culprit. Bad input: a missing file, a stage not in the schema.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_torch_env
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/operators" .
SF=daemon/analyze/stagefrontier
mkdir -p "$SF_WORK/shm"
t="$SF_WORK/traces"

# ddp_run NAME PORT FAULT: 3 ranks, 60 steps, traces of steps 41..50 (and one more) in $t.
ddp_run() {
  rm -rf "$t" && mkdir -p "$t"
  STAGEFRONTIER_SHM_DIR="$SF_WORK/shm" OMP_NUM_THREADS=1 \
    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 3 --master_port "$2" \
    --rdzv_id "$1" --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs-$1" \
    -m stagefrontier.torch.run --annotate client/examples/ddp_example.py --steps 60 \
    --fault "$3" --profile-steps 41:50 --profile-dir "$t" \
    >"$SF_WORK/torchrun-$1.log" 2>&1 || { cat "$SF_WORK/torchrun-$1.log"; sf_fail "torchrun ($1)"; }
}
ddp_run operators 29631 matmul:1:6

echo "== forward of rank 1 against ranks 0 and 2"
"$SF" compare-ops --stage forward --suspect "$t/trace_rank1.json" "$t/trace_rank0.json" \
  "$t/trace_rank2.json" | tee "$SF_WORK/forward.txt"
out=$("$SF" compare-ops --json --stage forward --suspect "$t/trace_rank1.json" \
  "$t/trace_rank0.json" "$t/trace_rank2.json")
[ "$(jq -r '.suspect_rank' <<<"$out")" = 1 ] || sf_fail "suspect rank"
# The issue's bar: the injected operator among the first three findings, a culprit.
[ "$(jq '[.findings[:3][] | select(.role == "culprit" and (.path | test("aten::(mm|matmul)$")))] | length' <<<"$out")" -ge 1 ] \
  || sf_fail "no matmul culprit in the first three: $out"
# The extra products cost about 6 ms per step: the finding must hold most of it.
jq -e '[.findings[] | select(.path | test("aten::(mm|matmul)$")) | .excess_ns] | max > 2e6' \
  <<<"$out" >/dev/null || sf_fail "excess too small: $out"

echo "== the same stage on rank 0, a rank without a fault: no culprit"
out=$("$SF" compare-ops --json --stage forward --suspect "$t/trace_rank0.json" \
  "$t/trace_rank2.json")
[ "$(jq '[.findings[] | select(.role == "culprit" and .excess_ns > 2e6)] | length' <<<"$out")" \
  = 0 ] || sf_fail "rank 0 has a culprit: $out"

echo "== a slower data loader on rank 2"
ddp_run operators2 29632 data:2:8
"$SF" compare-ops --stage data --suspect "$t/trace_rank2.json" "$t/trace_rank0.json" \
  "$t/trace_rank1.json" | tee "$SF_WORK/data.txt"
out=$("$SF" compare-ops --json --stage data --suspect "$t/trace_rank2.json" \
  "$t/trace_rank0.json" "$t/trace_rank1.json")
# The sleep is Python time between two operators inside the loader's next(): the loader's
# own time, a culprit (the module is not listed again by inclusion).
[ "$(jq -r '.findings[0].role' <<<"$out")" = culprit ] || sf_fail "no culprit first: $out"
[ "$(jq -r '.findings[0].own_time' <<<"$out")" = true ] || sf_fail "not own time: $out"
jq -r '.findings[0].path' <<<"$out" | grep '^enumerate(DataLoader).* (own time between ' >/dev/null \
  || sf_fail "the first finding is not in the loader: $(jq -r '.findings[0].path' <<<"$out")"
jq -e '.findings[0].excess_ns > 4e6' <<<"$out" >/dev/null || sf_fail "own time too small: $out"

echo "== bad input"
set +e
msg=$("$SF" compare-ops --stage data --suspect "$t/none.json" "$t/trace_rank0.json" 2>&1)
rc=$?
set -e
[ $rc = 2 ] && grep -q "cannot read $t/none.json" <<<"$msg" || sf_fail "missing file: $rc $msg"
set +e
msg=$("$SF" compare-ops --stage loss --suspect "$t/trace_rank2.json" "$t/trace_rank0.json" 2>&1)
rc=$?
set -e
[ $rc = 2 ] && grep -q 'stage "loss" is not in the schema' <<<"$msg" || sf_fail "stage: $rc $msg"
echo PASS
