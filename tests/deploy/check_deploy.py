#!/usr/bin/env python3
"""Checks the deployment recipes and the docs against the real binaries.

Usage: check_deploy.py METRICS_TXT HELP_DIR
  METRICS_TXT  a /metrics scrape of a coordinator that accounted a small job
  HELP_DIR     coordinator.txt, sidecar.txt, sfctl.txt: each binary's --help output

Checks: Kubernetes manifests (kinds, the shared hostPath, probes, security contexts,
resources, secrets, every flag exists); Slurm and systemd recipes (flags exist; shell
syntax); the Grafana dashboard (every panel has queries, every metric they name is exported);
docs/ (every documented flag exists in --help, every documented metric in /metrics); the
Dockerfile (Debian 12, the three binaries). Prints one line per failure; exits 1 if any.
"""
import json
import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def flags_of(help_text):
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", help_text))


def check_flags(where, binary, args, helps):
    for a in args:
        m = re.match(r"(--[a-z][a-z0-9-]*)", a)
        if m and m.group(1) not in helps[binary]:
            fail(f"{where}: {binary} has no flag {m.group(1)}")


def exported_metrics(metrics_text):
    names = set()
    for line in metrics_text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            names.add(name)
            if kind == "histogram":
                names.update({name + "_bucket", name + "_sum", name + "_count"})
        elif line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def binary_of(command):
    for b in ("stagefrontier-coordinator", "stagefrontier-sidecar", "stagefrontier-sweep", "sfctl"):
        if command.endswith(b):
            return b.replace("stagefrontier-", "")
    return None


def check_k8s(helps):
    docs = []
    for f in sorted((ROOT / "deploy/k8s").glob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                docs.append((f.name, d))
    kinds = {d["kind"] for _, d in docs}
    for k in ("Namespace", "PersistentVolumeClaim", "Deployment", "Service", "DaemonSet", "Pod",
              "Kustomization"):
        if k not in kinds:
            fail(f"k8s: no {k}")
    by_kind = {}
    for name, d in docs:
        by_kind.setdefault(d["kind"], []).append((name, d))
    for name, d in docs:
        if d["kind"] not in ("Deployment", "DaemonSet", "Pod"):
            continue
        spec = d["spec"]["template"]["spec"] if d["kind"] != "Pod" else d["spec"]
        psc = spec.get("securityContext", {})
        if not psc.get("runAsNonRoot"):
            fail(f"{name}: {d['kind']} does not run as non-root")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec.get("initContainers", []):
            where = f"{name}: init container {c['name']}"
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes:
                    fail(f"{where}: mounts undefined volume {m['name']}")
            for line in c.get("args", []):
                m = re.search(r"stagefrontier-sweep\s+(.*?)(;|$)", " ".join(line.split()))
                if m:
                    check_flags(where, "sweep", [a.split("=", 1)[0] for a in m.group(1).split()],
                                helps)
        for c in spec["containers"]:
            where = f"{name}: container {c['name']}"
            if d["kind"] != "Pod":
                sc = c.get("securityContext", {})
                if not sc.get("readOnlyRootFilesystem"):
                    fail(f"{where}: root filesystem not read-only")
                if sc.get("allowPrivilegeEscalation") is not False:
                    fail(f"{where}: privilege escalation not disabled")
                res = c.get("resources", {})
                if not res.get("requests") or not res.get("limits"):
                    fail(f"{where}: no resource requests and limits")
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes:
                    fail(f"{where}: mounts undefined volume {m['name']}")
            b = binary_of(c.get("command", [""])[0])
            if b:
                check_flags(where, b, c.get("args", []), helps)
    # The shared segment directory: the same hostPath in the DaemonSet and the training pod,
    # and the stub pointed at it.
    ds = by_kind["DaemonSet"][0][1]["spec"]["template"]["spec"]
    pod = by_kind["Pod"][0][1]["spec"]
    ds_path = {v["hostPath"]["path"] for v in ds["volumes"] if "hostPath" in v}
    pod_path = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    if not ds_path or ds_path != pod_path:
        fail(f"k8s: sidecar hostPath {ds_path} and training pod hostPath {pod_path} differ")
    sidecar_args = ds["containers"][0]["args"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}
    shm_arg = [a.split("=", 1)[1] for a in sidecar_args if a.startswith("--shm-dir=")]
    if not shm_arg or env.get("STAGEFRONTIER_SHM_DIR") != shm_arg[0]:
        fail("k8s: the training pod's STAGEFRONTIER_SHM_DIR is not the sidecar's --shm-dir")
    groups = set(map(str, ds.get("securityContext", {}).get("supplementalGroups", [])))
    if env.get("STAGEFRONTIER_SHM_GROUP") not in groups:
        fail("k8s: the segment group is not one of the sidecar's supplemental groups")
    # The coordinator: probes on its health port, data on the PVC, TLS wired.
    dep = by_kind["Deployment"][0][1]["spec"]["template"]["spec"]
    c = dep["containers"][0]
    health = [a for a in c["args"] if a.startswith("--health-listen=")]
    hport = int(health[0].rsplit(":", 1)[1]) if health else None
    for probe in ("readinessProbe", "livenessProbe"):
        if c.get(probe, {}).get("grpc", {}).get("port") != hport:
            fail(f"k8s: coordinator {probe} is not a grpc probe on --health-listen's port")
    pvcs = {n for _, d in by_kind["PersistentVolumeClaim"] for n in [d["metadata"]["name"]]}
    claims = {v["persistentVolumeClaim"]["claimName"] for v in dep["volumes"]
              if "persistentVolumeClaim" in v}
    if not claims or not claims <= pvcs:
        fail("k8s: the coordinator's data volume is not the PVC")
    if not any(a.startswith("--tls-cert=") for a in c["args"]):
        fail("k8s: the coordinator does not serve TLS")
    svc_ports = {p["port"] for _, d in by_kind["Service"] for p in d["spec"]["ports"]}
    if 7311 not in svc_ports:
        fail("k8s: the Service does not expose gRPC 7311")


def joined_lines(text):
    return text.replace("\\\n", " ").splitlines()


def check_scripts(helps):
    for f in sorted((ROOT / "deploy/slurm").iterdir()):
        r = subprocess.run(["bash", "-n", str(f)], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{f.name}: shell syntax: {r.stderr.strip()}")
        for line in joined_lines(f.read_text()):
            for b in ("coordinator", "sidecar", "sweep", "sfctl"):
                token = "stagefrontier-" + b if b != "sfctl" else "sfctl"
                # The binary as a command word (a path's last part), not inside a unit name.
                m = re.search(r"(?:^|[\s/'\"])" + token + r"(?=[\s'\"]|$)", line)
                if m and not line.lstrip().startswith("#"):
                    check_flags(f.name, b, line[m.end():].split(), helps)
    for f in sorted((ROOT / "deploy/systemd").glob("*.service")):
        for line in f.read_text().splitlines():
            if line.startswith("ExecStart="):
                b = binary_of(line.split()[0])
                check_flags(f.name, b, line.split()[1:], helps)


def check_grafana(metrics):
    d = json.loads((ROOT / "deploy/grafana/stagefrontier-dashboard.json").read_text())
    if not d.get("panels"):
        fail("grafana: no panels")
    for p in d["panels"]:
        exprs = [t.get("expr", "") for t in p.get("targets", [])]
        if not exprs or not all(exprs):
            fail(f"grafana: panel {p.get('title')} has no query")
        for e in exprs:
            for name in re.findall(r"\b(stagefrontier_[a-z_]+)", e):
                if name not in metrics:
                    fail(f"grafana: panel {p.get('title')!r} queries {name}, which is not exported")
    for v in d["templating"]["list"]:
        for name in re.findall(r"\b(stagefrontier_[a-z_]+)", json.dumps(v)):
            if name not in metrics:
                fail(f"grafana: variable {v['name']} uses {name}, which is not exported")
    # The dashboard leads to the coordinator's web view of the same job.
    if not any("#job=${training_job}" in link.get("url", "") for link in d.get("links", [])):
        fail("grafana: no link to the web view of the selected job")
    if "web_view" not in [v["name"] for v in d["templating"]["list"]]:
        fail("grafana: no web_view variable for the web view's address")
    scrape = yaml.safe_load((ROOT / "deploy/grafana/prometheus-scrape.yml").read_text())
    if not scrape["scrape_configs"][0]["static_configs"][0]["targets"]:
        fail("grafana: the scrape config has no target")


def check_docs(metrics, helps):
    all_flags = set().union(*helps.values())
    for f in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        text = f.read_text()
        for name in set(re.findall(r"`(stagefrontier_[a-z_]+)", text)):
            if name not in metrics:
                fail(f"{f.name}: documents metric {name}, which /metrics does not export")
    ops = (ROOT / "docs/operations.md").read_text()
    sections = {"coordinator": "## Coordinator flags", "sidecar": "## Sidecar flags"}
    for b, head in sections.items():
        part = ops.split(head, 1)[1].split("\n## ", 1)[0]
        for flag in set(re.findall(r"`(--[a-z][a-z0-9-]*)", part)):
            if flag not in helps[b]:
                fail(f"operations.md: {b} flag {flag} does not exist")
    cli = (ROOT / "docs/cli.md").read_text()
    part = cli.split("## `sfctl`", 1)[1].split("\n## ", 1)[0]
    for flag in set(re.findall(r"(--[a-z][a-z0-9-]*)", part)):
        if flag not in helps["sfctl"] and flag not in all_flags:
            fail(f"cli.md: sfctl flag {flag} does not exist")


def check_dockerfile():
    text = (ROOT / "deploy/Dockerfile").read_text()
    if not re.search(r"^FROM debian:12", text, re.M):
        fail("Dockerfile: not Debian 12")
    if "install-deps.sh" not in text:
        fail("Dockerfile: does not use deploy/install-deps.sh")
    for b in ("stagefrontier-coordinator", "stagefrontier-sidecar", "sfctl"):
        if b not in text:
            fail(f"Dockerfile: does not ship {b}")


def main():
    metrics = exported_metrics(pathlib.Path(sys.argv[1]).read_text())
    helps = {}
    for b in ("coordinator", "sidecar", "sfctl", "sweep"):
        helps[b] = flags_of((pathlib.Path(sys.argv[2]) / f"{b}.txt").read_text())
    # sfctl's subcommand flags.
    # sfctl's subcommand flags: every sfctl-<command>.txt the test collected.
    for p in pathlib.Path(sys.argv[2]).glob("sfctl-*.txt"):
        helps["sfctl"] |= flags_of(p.read_text())
    check_k8s(helps)
    check_scripts(helps)
    check_grafana(metrics)
    check_docs(metrics, helps)
    check_dockerfile()
    print(f"check_deploy: {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
