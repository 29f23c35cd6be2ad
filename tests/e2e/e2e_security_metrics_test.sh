#!/usr/bin/env bash
# TLS and the shared token on every connection (sidecar -> coordinator, sfctl -> coordinator),
# and the coordinator's /metrics scraped by a real Prometheus server (Debian's `prometheus`)
# whose HTTP API must return the expected series.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/secure" .
PROM_PID=
trap 'sf_stop_all; [ -n "$PROM_PID" ] && kill $PROM_PID 2>/dev/null; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT
command -v prometheus >/dev/null || sf_fail "prometheus is not installed (deploy/install-deps.sh installs it)"

# A CA and a server certificate for 127.0.0.1.
tls=$SF_WORK/tls
mkdir -p "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=sf-test-ca" \
  -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
printf "subjectAltName=IP:127.0.0.1\n" >"$tls/ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
  -CAcreateserial -days 2 -extfile "$tls/ext" -out "$tls/server.pem" 2>/dev/null
echo "correct-horse" >"$tls/token"
echo "wrong" >"$tls/bad-token"

SF_CTL_FLAGS=(--tls-ca "$tls/ca.pem" --token-file "$tls/token")
sf_start_coordinator 17341 17342 --tls-cert "$tls/server.pem" --tls-key "$tls/server.key" \
  --token-file "$tls/token" --health-listen 127.0.0.1:17343 --http-listen 127.0.0.1:17344 \
  || sf_fail "coordinator"
# The plaintext probe port (Kubernetes grpc probes cannot speak TLS) accepts connections.
(exec 3<>/dev/tcp/127.0.0.1/17343) || sf_fail "no health port"
sf_start_sidecar node0 --tls-ca "$tls/ca.pem" --token-file "$tls/token"
sf_run_trainers job1 4 1 150 --fault forward:2:10 --fault-start 30 || sf_fail "trainers"
sf_wait_steps job1 150 30 || sf_fail "steps over TLS"
[ "$(sf_ctl --json suspects --job job1 | jq -r '.verdict.suspects[0].rank')" = 2 ] || sf_fail "suspect"

# The web view (--http-listen) follows the gRPC port's rules: HTTPS with its certificate, its
# token for the API. web_get PATH TOKEN SCHEME prints "STATUS BODY" (or the client's error).
web_get() {
  /usr/bin/python3 - "$@" "$tls/ca.pem" <<'PY'
import http.client, ssl, sys
path, token, scheme, ca = sys.argv[1:5]
if scheme == "https":
    c = http.client.HTTPSConnection("127.0.0.1", 17344, timeout=5,
                                    context=ssl.create_default_context(cafile=ca))
else:
    c = http.client.HTTPConnection("127.0.0.1", 17344, timeout=5)
try:
    c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    r = c.getresponse()
    print(r.status, r.read().decode())
except Exception as e:  # what a plaintext client gets from the TLS port
    print("error", type(e).__name__, e)
PY
}
got=$(web_get /api/jobs correct-horse https)
[[ "$got" == "200 "*'"job":"job1"'* ]] || sf_fail "web API with the token over HTTPS: $got"
got=$(web_get /api/jobs "" https)
[[ "$got" == "401 "*UNAUTHENTICATED* ]] || sf_fail "web API without the token: $got"
got=$(web_get /api/jobs wrong https)
[[ "$got" == "401 "* ]] || sf_fail "web API with a wrong token: $got"
got=$(web_get / "" https)
[[ "$got" == "200 <!doctype html>"* ]] || sf_fail "web page over HTTPS: $got"
got=$(web_get /api/jobs correct-horse http)
[[ "$got" != 200* ]] || sf_fail "the web view answered plaintext HTTP: $got"

set +e
SF_CTL_FLAGS=(--tls-ca "$tls/ca.pem" --token-file "$tls/bad-token")
sf_ctl jobs 2>"$SF_WORK/err"; rc=$?
[ $rc = 1 ] && grep -q "wrong token" "$SF_WORK/err" || sf_fail "wrong token: rc $rc"
SF_CTL_FLAGS=()
sf_ctl --timeout 3 jobs 2>"$SF_WORK/err"; rc=$?
[ $rc = 3 ] || sf_fail "plaintext against TLS should not connect: rc $rc"
set -e
SF_CTL_FLAGS=(--tls-ca "$tls/ca.pem" --token-file "$tls/token")
# Regression: a sidecar with the wrong token logged only CANCELLED; it must say why.
sf_start_sidecar node1 --tls-ca "$tls/ca.pem" --token-file "$tls/bad-token"
for i in $(seq 50); do
  grep -q "UNAUTHENTICATED: missing or wrong token" "$SF_WORK/sidecar-node1.log" && break
  sleep 0.1
done
grep -q "UNAUTHENTICATED: missing or wrong token" "$SF_WORK/sidecar-node1.log" \
  || sf_fail "the sidecar does not say its token was refused"

# A real Prometheus scrapes /metrics.
cat >"$SF_WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: stagefrontier
    static_configs:
      - targets: ["127.0.0.1:17342"]
YAML
prometheus --config.file="$SF_WORK/prometheus.yml" --storage.tsdb.path="$SF_WORK/tsdb" \
  --web.listen-address=127.0.0.1:17349 >"$SF_WORK/prometheus.log" 2>&1 &
PROM_PID=$!
query() { curl -sf --get "http://127.0.0.1:17349/api/v1/query" --data-urlencode "query=$1"; }
for i in $(seq 60); do
  v=$(query 'stagefrontier_steps_accounted_total{training_job="job1",completeness="complete"}' 2>/dev/null \
      | jq -r '.data.result[0].value[1] // empty' 2>/dev/null || true)
  [ "$v" = 150 ] && break
  sleep 0.5
done
[ "${v:-}" = 150 ] || sf_fail "Prometheus did not get stagefrontier_steps_accounted_total=150 (got '${v:-}')"
for series in \
  'stagefrontier_rank_steps_received_total{training_job="job1",outcome="accepted"}' \
  'stagefrontier_stage_exposed_seconds_total{training_job="job1",stage="forward"}' \
  'stagefrontier_stage_excess_seconds_total{training_job="job1",stage="forward"}' \
  'stagefrontier_top_suspect_rank{training_job="job1",stage="forward"}' \
  'stagefrontier_verdicts_total{training_job="job1",label="CLEAR"}' \
  'stagefrontier_ranks{training_job="job1",state="reporting"}' \
  'stagefrontier_window_verdict{training_job="job1"}' \
  'stagefrontier_step_close_delay_seconds_bucket{training_job="job1",le="0.1"}' \
  'stagefrontier_sidecar_streams' \
  'stagefrontier_unauthenticated_requests_total'; do
  n=$(query "$series" | jq '.data.result | length')
  [ "$n" -ge 1 ] || sf_fail "Prometheus has no series $series"
  echo "found $series = $(query "$series" | jq -r '.data.result[0].value[1]')"
done
[ "$(query 'stagefrontier_top_suspect_rank{training_job="job1",stage="forward"}' | jq -r '.data.result[0].value[1]')" = 2 ] \
  || sf_fail "top suspect rank gauge"
[ "$(query 'stagefrontier_unauthenticated_requests_total' | jq -r '.data.result[0].value[1]')" -ge 1 ] \
  || sf_fail "the wrong token was not counted"

# Issue 28, item 6: with client certificates, a sidecar's node name is its certificate's CN.
echo "== mutual TLS: the node name must be the client certificate's"
for cn in node7 node8; do
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$cn" -keyout "$tls/$cn.key" \
    -out "$tls/$cn.csr" 2>/dev/null
  openssl x509 -req -in "$tls/$cn.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -out "$tls/$cn.pem" 2>/dev/null
done
mkdir -p "$SF_WORK/data-mtls" "$SF_WORK/shm-m1" "$SF_WORK/shm-m2"
"$SF_BIN/daemon/coordinator/stagefrontier-coordinator" --listen 127.0.0.1:17345 \
  --metrics-listen 127.0.0.1:17346 --data-dir "$SF_WORK/data-mtls" --tls-cert "$tls/server.pem" \
  --tls-key "$tls/server.key" --tls-client-ca "$tls/ca.pem" --token-file "$tls/token" \
  >"$SF_WORK/coordinator-mtls.log" 2>&1 &
MTLS_PIDS=($!)
sidecar_as() {  # sidecar_as NODE CERT SHM LOG
  "$SF_BIN/daemon/sidecar/stagefrontier-sidecar" --coordinator 127.0.0.1:17345 --node "$1" \
    --tls-ca "$tls/ca.pem" --tls-cert "$tls/$2.pem" --tls-key "$tls/$2.key" \
    --token-file "$tls/token" --shm-dir "$SF_WORK/$3" >"$SF_WORK/$4" 2>&1 &
  MTLS_PIDS+=($!)
}
sidecar_as node7 node7 shm-m1 sidecar-m1.log   # its own certificate
sidecar_as node7 node8 shm-m2 sidecar-m2.log   # node8's certificate, claiming node7
for _ in $(seq 50); do
  grep -q "connected" "$SF_WORK/coordinator-mtls.log" &&
    grep -q "not the client certificate" "$SF_WORK/sidecar-m2.log" && break
  sleep 0.2
done
kill "${MTLS_PIDS[@]}" 2>/dev/null || true
grep -q "sidecar node7 (node7/[0-9]*/[0-9a-f]*) connected" "$SF_WORK/coordinator-mtls.log" \
  || sf_fail "node7 with its own certificate: $(cat "$SF_WORK/coordinator-mtls.log")"
# (The sidecar's log escapes the quotes of the coordinator's message.)
grep -q 'PERMISSION_DENIED: node name .*node7.* is not the client certificate.*(CN .*node8' \
  "$SF_WORK/sidecar-m2.log" || sf_fail "node8's certificate as node7: $(cat "$SF_WORK/sidecar-m2.log")"
echo "PASS"
