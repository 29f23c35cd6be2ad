#!/usr/bin/env bash
# The package layers (bazel/layers.bzl) hold, run by ./run.sh test:
#   1. every package under base/, client/, daemon/, proto/ and shm/ takes its visibility from
#      visible_above() (no package is public to all);
#   2. the whole tree passes analysis, visibility checked (no dependency points down-to-up);
#   3. a dependency that points the wrong way fails: //daemon/accounting:wrong_way_dependency
#      (tagged manual) asks for the coordinator and must be refused as not visible.
# Prints "//tests/layers:<check> PASSED|FAILED".
set -uo pipefail
cd "$(dirname "$0")/../.."
rc=0
missing=$(for f in $(find base client daemon proto shm -name BUILD.bazel | sort); do
  grep -q 'default_visibility = visible_above("//'"$(dirname "$f")"'")' "$f" || echo "$f"
done)
if [ -z "$missing" ]; then
  echo "//tests/layers:every_package_layered PASSED"
else
  echo "packages without visible_above(their own name): $missing"
  echo "//tests/layers:every_package_layered FAILED"
  rc=1
fi
if bazel build --nobuild //... >/dev/null 2>&1; then
  echo "//tests/layers:analysis PASSED"
else
  bazel build --nobuild //... 2>&1 | grep -E '^ERROR' | sed -n 1,20p
  echo "//tests/layers:analysis FAILED"
  rc=1
fi
out=$(bazel build --nobuild //daemon/accounting:wrong_way_dependency 2>&1)
if [ $? -ne 0 ] && [[ "$out" == *"is not visible from target '//daemon/accounting:wrong_way_dependency'"* ]]; then
  echo "//tests/layers:wrong_way_refused PASSED"
else
  echo "$out" | tail -n 20
  echo "//tests/layers:wrong_way_refused FAILED (a lower package could depend on the coordinator)"
  rc=1
fi
exit $rc
