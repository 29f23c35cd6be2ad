#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/stagefrontier-prolog.sh): the site variant,
# where every node runs a sidecar for every job without changes to the users' batch scripts.
# Starts a sidecar for this job under systemd (a transient unit, so slurmd does not wait for
# it) draining the job's own segment directory. The coordinator runs as a site service
# (deploy/systemd/stagefrontier-coordinator.service); set its address below.
set -euo pipefail
COORDINATOR=${STAGEFRONTIER_COORDINATOR:-stagefrontier.example.internal:7311}
DIR=/dev/shm/stagefrontier-$SLURM_JOB_ID
install -d -m 2770 -o root -g "${SLURM_JOB_GID:-0}" "$DIR"
systemd-run --unit="stagefrontier-sidecar-$SLURM_JOB_ID" --property=Restart=on-failure \
  --property=DynamicUser=yes --property=SupplementaryGroups="${SLURM_JOB_GID:-0}" \
  /usr/bin/stagefrontier-sidecar --coordinator "$COORDINATOR" --shm-dir "$DIR"
# Jobs find the directory through TaskProlog, which prints: export STAGEFRONTIER_SHM_DIR=$DIR
