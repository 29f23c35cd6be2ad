#!/usr/bin/env bash
# StageFrontier drain hook for Kubernetes: taints a node the coordinator found chronic so that
# no new training pod is scheduled on it (pods without a matching toleration), and records
# why in an annotation. Start the coordinator with
#   --drain-command /usr/lib/stagefrontier/taint-node.sh --drain-execute
# in a pod whose service account may patch nodes (RBAC: nodes get/patch). The sidecar
# DaemonSet passes the Kubernetes node name as --node, which the coordinator hands over as
# SF_NODE (docs/operations.md "Node health"). Undo with
#   kubectl taint nodes <node> stagefrontier.io/chronic-straggler-
set -euo pipefail
: "${SF_NODE:?SF_NODE is set by the coordinator drain hook}"
kubectl taint nodes "$SF_NODE" stagefrontier.io/chronic-straggler=true:NoSchedule --overwrite
kubectl annotate nodes "$SF_NODE" --overwrite \
  "stagefrontier.io/chronic-reason=${SF_REASON:-StageFrontier: chronic straggler}"
