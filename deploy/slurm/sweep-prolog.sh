#!/usr/bin/env bash
# Slurm Prolog that qualifies the node before each job (Guard's node sweep; docs/operations.md
# "Node sweep"): slurm.conf: Prolog=/etc/slurm/stagefrontier-sweep-prolog.sh (chain it with
# prolog.sh if both are used). A prolog that exits non-zero makes Slurm drain the node and
# requeue the job, which is what a node that fails its sweep should get. A coordinator that
# cannot be reached (exit 3) does not block the cluster: the figures are logged and the job
# runs. The quick battery takes a few seconds; drop --quick for the full one (about a minute
# with GPUs).
set -uo pipefail
COORDINATOR=${STAGEFRONTIER_COORDINATOR:-stagefrontier.example.internal:7311}
/usr/bin/stagefrontier-sweep --coordinator "$COORDINATOR" --node "$(hostname -s)" \
  --scratch /var/tmp --token-file /etc/stagefrontier/token --quick \
  >"/var/log/stagefrontier-sweep.$SLURM_JOB_ID.log" 2>&1
rc=$?
[ $rc -eq 3 ] && exit 0
exit $rc
