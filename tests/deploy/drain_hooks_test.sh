#!/usr/bin/env bash
# The shipped drain hooks (deploy/slurm/drain-node.sh, deploy/k8s/taint-node.sh) run as the
# coordinator runs them (/bin/sh -c with SF_NODE and SF_REASON in the environment) against
# stand-ins for scontrol and kubectl that record their arguments; they must ask for exactly
# the drain / taint, and refuse to run without SF_NODE.
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}/drain"
mkdir -p "$work/bin"
for tool in scontrol kubectl; do
  cat >"$work/bin/$tool" <<STUB
#!/usr/bin/env bash
printf '%s\n' "\$*" >>"$work/$tool.calls"
STUB
  chmod +x "$work/bin/$tool"
done
export PATH="$work/bin:$PATH"
reason='StageFrontier: chronic straggler, 12.0 GPU-seconds wasted (stages data)'

SF_NODE=gpu-07 SF_REASON="$reason" /bin/sh -c deploy/slurm/drain-node.sh
want="update NodeName=gpu-07 State=DRAIN Reason=$reason"
[ "$(cat "$work/scontrol.calls")" = "$want" ] || { echo "FAIL scontrol: $(cat "$work/scontrol.calls")"; exit 1; }

SF_NODE=gpu-07 SF_REASON="$reason" /bin/sh -c deploy/k8s/taint-node.sh
want="taint nodes gpu-07 stagefrontier.io/chronic-straggler=true:NoSchedule --overwrite
annotate nodes gpu-07 --overwrite stagefrontier.io/chronic-reason=$reason"
[ "$(cat "$work/kubectl.calls")" = "$want" ] || { echo "FAIL kubectl: $(cat "$work/kubectl.calls")"; exit 1; }

for hook in deploy/slurm/drain-node.sh deploy/k8s/taint-node.sh; do
  if env -u SF_NODE "$hook" 2>"$work/err"; then echo "FAIL: $hook ran without SF_NODE"; exit 1; fi
  grep -q "SF_NODE is set by the coordinator drain hook" "$work/err" || { echo "FAIL: $hook's error"; exit 1; }
done
[ "$(wc -l <"$work/scontrol.calls")" = 1 ] || { echo "FAIL: a hook without SF_NODE called scontrol"; exit 1; }
echo "PASS: drain-node.sh and taint-node.sh ask for the drain and the taint"
