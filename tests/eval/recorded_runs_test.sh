#!/bin/bash
# Bazel entry for recorded_runs_test.py (Debian's python3; no Python rules in this workspace).
set -euo pipefail
exec python3 "$(dirname "$0")/recorded_runs_test.py" "$1"
