#!/bin/bash
# Runs python_client_test.py with Debian's /usr/bin/python3 and the Bazel-built module.
set -euo pipefail
here="$TEST_SRCDIR/$TEST_WORKSPACE"
export PYTHONPATH="$here/client/python"
export STAGEFRONTIER_CLI="$here/daemon/analyze/stagefrontier"
# The module is built for Debian's Python; under ASan it needs the runtime preloaded.
libs=$(ldd "$here/client/python/stagefrontier/_stagefrontier.so")  # not piped into grep -q: SIGPIPE + pipefail
if [[ "$libs" == *libasan* ]]; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  # CPython itself leaks by design at exit; the leak checker is for our C++ tests.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
/usr/bin/python3 "$here/tests/client/python_client_test.py"
# The Python example runs as documented and records every step.
out=$(STAGEFRONTIER_SHM_DIR="${TEST_TMPDIR:-/tmp}" TORCHELASTIC_RUN_ID=pyexample RANK=0 \
  /usr/bin/python3 "$here/client/examples/toy_loop.py" --steps 7)
echo "$out"
[[ "$out" == "rank 0: 7 steps, 7 recorded, 0 dropped (ring full), 0 not recorded" ]]
# stagefrontier.torch on a plain PyTorch loop (skipped, with the reason, without torch).
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 "$here/tests/client/python_torch_test.py"
  /usr/bin/python3 "$here/tests/client/python_capture_test.py"
else
  echo "SKIPPED python_torch_test: python3-torch is not installed (deploy/install-deps.sh installs it)"
fi
