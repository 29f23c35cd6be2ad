#!/usr/bin/env bash
# Slurm Epilog: stops the job's sidecar (SIGTERM: it flushes first) and removes the segments.
set -uo pipefail
systemctl stop "stagefrontier-sidecar-$SLURM_JOB_ID.service" 2>/dev/null
rm -rf "/dev/shm/stagefrontier-$SLURM_JOB_ID"
exit 0
