#!/usr/bin/env bash
# Checks the Prometheus alerting rules (deploy/prometheus/alerts.yml):
#  1. promtool validates them, and the scrape snippet that loads them
#     (deploy/grafana/prometheus-scrape.yml, rule_files);
#  2. every stagefrontier_* metric they (and their tests) read is one the coordinator
#     registers, and every recording rule they read is defined: PromQL does not know which
#     names exist, so a misspelt name would make an alert silently never fire;
#  3. their unit tests pass (deploy/prometheus/alerts_test.yml: each alert fires where it
#     should, with its labels and annotations, and stays quiet where it should);
#  4. every alert has a unit test that sees it fire and one that sees it stay quiet.
# promtool comes with Debian's prometheus package (deploy/install-deps.sh): without it the
# test fails, it does not skip.
set -euo pipefail
rules=deploy/prometheus/alerts.yml
tests=deploy/prometheus/alerts_test.yml
# The files that register metrics (prometheus-cpp's BuildCounter/BuildGauge/... .Name("...")).
sources=(
  daemon/coordinator/coordinator_metrics.cc
  daemon/captures/capture_metrics.cc
  daemon/nodes/node_metrics.cc
)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

promtool=$(command -v promtool) ||
  fail "promtool not found: install Debian's prometheus package (deploy/install-deps.sh does)"

# 1. Syntax and PromQL of the rules, and the scrape snippet with its rule_files (a relative
# path there is read from the config's directory, where the rules are copied).
"$promtool" check rules "$rules"
work="${TEST_TMPDIR:-$(mktemp -d)}/prometheus"
mkdir -p "$work"
cp deploy/grafana/prometheus-scrape.yml "$work/prometheus.yml"
cp "$rules" "$work/stagefrontier-alerts.yml"
"$promtool" check config "$work/prometheus.yml"

# 2. Names, before the unit tests (whose failure would not say why). A metric name follows
# neither a letter nor ':' (recording rules are named level:metric:operation). A histogram
# is read as NAME_bucket/_sum/_count; counters are registered with their _total.
names=$(grep -ohE '(^|[^:A-Za-z0-9_])stagefrontier_[a-z0-9_]+' "$rules" "$tests" |
  sed -E 's/^[^s]//' | sort -u)
[ -n "$names" ] || fail "no stagefrontier_ metric found in $rules"
for name in $names; do
  base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
  if ! grep -qF "\"$name\"" "${sources[@]}" && ! grep -qF "\"$base\"" "${sources[@]}"; then
    fail "$name (in $rules or $tests) is not a metric the coordinator registers (looked in ${sources[*]}; a new file that registers metrics belongs in this list and in the test's data)"
  fi
done
echo "metrics: $(wc -w <<<"$names") names, all registered by the coordinator"
recorded=$(sed -nE 's/^ *- record: *([^ ]+) *$/\1/p' "$rules" | sort -u)
for name in $(grep -ohE '[a-z_]+:[a-z0-9_]+:[a-z0-9_]+' "$rules" | sort -u); do
  grep -qxF "$name" <<<"$recorded" || fail "$name is read in $rules but never recorded there"
done

# 3. The unit tests (promtool reads alerts.yml relative to the test file).
"$promtool" test rules "$tests"

# 4. Each alert fires in some test case and stays quiet in another.
/usr/bin/python3 - "$rules" "$tests" <<'EOF'
import sys
import yaml

rules = yaml.safe_load(open(sys.argv[1]))
tests = yaml.safe_load(open(sys.argv[2]))
alerts = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
fires, quiet = set(), set()
for t in tests["tests"]:
    for case in t.get("alert_rule_test", []):
        (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
bad = [f"{a}: no case where it fires" for a in alerts if a not in fires]
bad += [f"{a}: no case where it stays quiet" for a in alerts if a not in quiet]
for b in bad:
    print("FAIL:", b, file=sys.stderr)
if bad:
    sys.exit(1)
print(f"alerts: {len(alerts)}, each tested firing and quiet")
EOF
echo PASS
