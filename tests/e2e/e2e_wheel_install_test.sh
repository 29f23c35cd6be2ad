#!/usr/bin/env bash
# The wheel as a PyTorch user gets it: `pip install` into a fresh virtual environment that sees
# Debian's torch, nothing from Bazel on the path, then the real DDP example under torchrun with
# `-m stagefrontier.torch.run` (the README's quick start) through a real sidecar and
# coordinator: its records must arrive and the injected slow rank be named.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/wheel" "$PWD"  # absolute: the test leaves the runfiles
trap 'sf_stop_all' EXIT
wheel=$(echo "$PWD"/client/python/stagefrontier-*-cp311-cp311-linux_x86_64.whl)
[ -f "$wheel" ] || sf_fail "no wheel in the runfiles: $wheel"
example="$PWD/client/examples/ddp_example.py"

# The archive is a valid wheel: RECORD's hashes and sizes hold (wheel unpack checks them).
/usr/bin/python3 -m wheel unpack --dest "$SF_WORK/unpacked" "$wheel" >/dev/null \
  || sf_fail "wheel unpack refused $wheel"
# SKIPPED without python3-torch; the ASan runtimes preloaded when the wheel's module has ASan
# (--config=asan). Nothing of it stays on PYTHONPATH.
sf_torch_env "$(echo "$SF_WORK"/unpacked/stagefrontier-*)"
unset PYTHONPATH

venv="$SF_WORK/venv"
/usr/bin/python3 -m venv --system-site-packages "$venv" || sf_fail "python3 -m venv"
"$venv/bin/pip" install --no-index --no-deps --disable-pip-version-check "$wheel" \
  >"$SF_WORK/pip.log" 2>&1 || sf_fail "pip install: $(cat "$SF_WORK/pip.log")"
cd "$SF_WORK"  # away from the runfiles: only the installed package can be imported
got=$("$venv/bin/python" -c 'import importlib.metadata as m, stagefrontier
print(stagefrontier.__file__, stagefrontier.__version__, m.version("stagefrontier"))')
echo "installed: $got"
read -r file version meta <<<"$got"
[[ "$file" == "$venv/lib/python3.11/site-packages/stagefrontier/__init__.py" ]] \
  || sf_fail "imported from $file, not from the venv"
[ "$version" = "$meta" ] || sf_fail "__version__ $version, metadata $meta"
[[ "$wheel" == *"stagefrontier-$version-"* ]] || sf_fail "wheel name vs version $version"
so="$venv/lib/python3.11/site-packages/stagefrontier/_stagefrontier.so"
libs=$(ldd "$so")
[[ "$libs" != *"not found"* ]] || sf_fail "unresolved libraries: $libs"
[[ "$libs" != *bazel* ]] || sf_fail "the module needs a library from Bazel's tree: $libs"
# (Not `pip check`: it judges every package of the system site too, e.g. Debian's pygobject.)
shown=$("$venv/bin/pip" show stagefrontier)  # not piped into grep -q: SIGPIPE + pipefail
[[ "$shown" == *"Location: $venv/lib/python3.11/site-packages"* ]] || sf_fail "pip show: $shown"
[ -x "$venv/bin/stagefrontier-torch-run" ] || sf_fail "no stagefrontier-torch-run script"

sf_start_coordinator 17441 17442 --step-deadline-ms 10000 --no-captures || sf_fail "coordinator"
sf_start_sidecar node0
mkdir -p "$SF_WORK/shm-node0"
# --redirects/--tee: Debian 12's torch 1.13 on Python 3.11 needs them nonzero (see
# e2e_torch_ddp_test.sh).
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  "$venv/bin/python" -m torch.distributed.run --nproc_per_node 3 --master_port 29651 \
  --rdzv_id wheel --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs" \
  -m stagefrontier.torch.run "$example" --steps 160 --fault data:1:25 --fault-start 30 \
  >"$SF_WORK/torchrun.log" 2>&1 || sf_fail "torchrun"
sf_wait_steps wheel 160 30 || sf_fail "steps"
health=$(sf_ctl --json health --job wheel)
[ "$(jq '[.ranks[] | select(.state == "reporting")] | length' <<<"$health")" = 3 ] \
  || sf_fail "3 ranks reporting: $health"
json=$(sf_ctl --json suspects --job wheel)
top2=$(jq -r '[.verdict.suspects[:2][] | "\(.stage):\(.rank)"] | join(" ")' <<<"$json")
echo "top two suspects: $top2 ($(jq -r .verdict.label <<<"$json"))"
[[ " $top2 " == *" data:1 "* ]] || sf_fail "(data, 1) not in the top two: $top2"
echo "PASS: the wheel installed into a fresh venv and its records reached the coordinator"
