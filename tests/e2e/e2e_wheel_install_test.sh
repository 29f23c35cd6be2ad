#!/usr/bin/env bash
# The wheel as a PyTorch user gets it: `pip install` into a fresh virtual environment that sees
# Debian's torch, nothing from Bazel on the path, then the real DDP example under the venv's
# stagefrontier-torchrun (the README's quick start) through a real sidecar and coordinator: its
# records must arrive and the injected slow rank be named.
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
[ -x "$venv/bin/stagefrontier-torchrun" ] || sf_fail "no stagefrontier-torchrun script"
"$venv/bin/stagefrontier-torchrun" --help | grep "usage: stagefrontier-torchrun" >/dev/null \
  || sf_fail "stagefrontier-torchrun --help"
"$venv/bin/python" -m stagefrontier.torch.run --help | grep "usage: python -m stagefrontier" >/dev/null \
  || sf_fail "stagefrontier.torch.run --help"  # (was: exit 2, "unknown flag --help")

# Regression (issue 30, items 1-3): torch 1.13's torchrun on Python 3.11 died on its own default
# --redirects 0; a run without --rdzv_id is job "none" without a word. The launcher, with
# torchrun's defaults: the workers run, and the missing id is warned about.
# One write() per worker: print() writes its words apart when unbuffered, and the two workers'
# lines interleaved ("workerworker 10 nonenone", a CI failure of 2026-11-27).
printf 'import os\nos.write(1, ("worker %%s %%s\\n" %% (os.environ["RANK"], os.environ["TORCHELASTIC_RUN_ID"])).encode())\n' \
  >"$SF_WORK/hello.py"
STAGEFRONTIER_SHM_DIR="$SF_WORK" "$venv/bin/stagefrontier-torchrun" --nproc_per_node 2 \
  --master_port 29652 "$SF_WORK/hello.py" >"$SF_WORK/hello.log" 2>&1 \
  || sf_fail "stagefrontier-torchrun with torchrun's defaults: $(tail -5 "$SF_WORK/hello.log")"
grep -q "worker 1 none" "$SF_WORK/hello.log" || sf_fail "workers: $(cat "$SF_WORK/hello.log")"
grep -q "no --rdzv_id given: this run is reported as job 'none'" "$SF_WORK/hello.log" \
  || sf_fail "no warning for the default run id: $(cat "$SF_WORK/hello.log")"
# A Python without PyTorch gets told what to do, not a traceback.
/usr/bin/python3 -m venv "$SF_WORK/bare" || sf_fail "bare venv"
"$SF_WORK/bare/bin/pip" install --no-index --no-deps --disable-pip-version-check "$wheel" \
  >"$SF_WORK/pip-bare.log" 2>&1 || sf_fail "pip install (bare): $(cat "$SF_WORK/pip-bare.log")"
rc=0
"$SF_WORK/bare/bin/stagefrontier-torchrun" --nproc_per_node 1 "$SF_WORK/hello.py" \
  >"$SF_WORK/bare.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "cannot import PyTorch" "$SF_WORK/bare.log" \
  && grep -q -- "-m venv --system-site-packages" "$SF_WORK/bare.log" \
  && ! grep -q Traceback "$SF_WORK/bare.log" || sf_fail "without torch: rc $rc $(cat "$SF_WORK/bare.log")"

sf_start_coordinator 17441 17442 --step-deadline-ms 10000 --no-captures || sf_fail "coordinator"
sf_start_sidecar node0
mkdir -p "$SF_WORK/shm-node0"
# The README's line: the venv's stagefrontier-torchrun, torchrun's flags, the script unchanged.
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  "$venv/bin/stagefrontier-torchrun" --nproc_per_node 3 --master_port 29651 --rdzv_id wheel \
  "$example" --steps 160 --fault data:1:25 --fault-start 30 \
  >"$SF_WORK/torchrun.log" 2>&1 || sf_fail "torchrun: $(tail -20 "$SF_WORK/torchrun.log")"
sf_wait_steps wheel 160 30 || sf_fail "steps"
health=$(sf_ctl --json health --job wheel)
# Reporting, or finished once the sidecar saw the exited stubs' slots released.
[ "$(jq '[.ranks[] | select(.state == "reporting" or .state == "finished")] | length' \
  <<<"$health")" = 3 ] || sf_fail "3 ranks reporting or finished: $health"
json=$(sf_ctl --json suspects --job wheel)
top2=$(jq -r '[.verdict.suspects[:2][] | "\(.stage):\(.rank)"] | join(" ")' <<<"$json")
echo "top two suspects: $top2 ($(jq -r .verdict.label <<<"$json"))"
[[ " $top2 " == *" data:1 "* ]] || sf_fail "(data, 1) not in the top two: $top2"
echo "PASS: the wheel installed into a fresh venv and its records reached the coordinator"
