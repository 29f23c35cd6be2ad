#!/usr/bin/env bash
# Slurm TaskProlog: hands every task of the job its segment directory and group.
echo "export STAGEFRONTIER_SHM_DIR=/dev/shm/stagefrontier-$SLURM_JOB_ID"
echo "export STAGEFRONTIER_SHM_GROUP=${SLURM_JOB_GID:-}"
