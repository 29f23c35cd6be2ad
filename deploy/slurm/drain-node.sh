#!/usr/bin/env bash
# StageFrontier drain hook for Slurm: drains a node the coordinator found chronic (it keeps
# costing every job it serves), so that the scheduler places no new job on it; running jobs
# finish. Install it on the coordinator's host and start the coordinator with
#   --drain-command /usr/lib/stagefrontier/drain-node.sh --drain-execute
# (without --drain-execute the coordinator only logs what it would run). The coordinator sets
# SF_NODE (the sidecar's --node: keep it the Slurm node name, its default is the hostname)
# and SF_REASON; see docs/operations.md "Node health". Undo with
#   scontrol update NodeName=<node> State=RESUME
set -euo pipefail
: "${SF_NODE:?SF_NODE is set by the coordinator drain hook}"
reason=${SF_REASON:-StageFrontier: chronic straggler}
exec scontrol update "NodeName=$SF_NODE" State=DRAIN "Reason=${reason:0:250}"
