#!/usr/bin/python3
"""Tests of the deployment files: deploy/check_deploy.py passes on the tree and fails, naming
the problem, on copies broken one way each; the image's entrypoint turns its environment into
the right gpupiped flags (run against stand-ins for gpupiped and gpupipe).

    /usr/bin/python3 tests/deploy/check_deploy_test.py [-v]

Where kubectl, promtool or shellcheck are installed, it also renders the kustomization, checks
the Prometheus configuration and lints the entrypoint with them.
"""

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKER = os.path.join(ROOT, "deploy", "check_deploy.py")
ENTRYPOINT = os.path.join(ROOT, "deploy", "docker", "entrypoint.sh")
# What the checker reads: a copy of these is a tree it can check.
INPUTS = ["Dockerfile", ".dockerignore", "deploy", os.path.join("server", "flags.cc")]


def run_checker(root):
    p = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


class RealTreeTest(unittest.TestCase):
    def test_passes(self):
        rc, out, err = run_checker(ROOT)
        self.assertEqual(rc, 0, msg=out + err)
        self.assertRegex(out, r"check_deploy: \d+ checks passed")

    @unittest.skipUnless(shutil.which("kubectl"), "kubectl is not installed")
    def test_kustomization_renders(self):
        for components in ([], ["components/servicemonitor", "components/tls"]):
            with tempfile.TemporaryDirectory() as tmp:
                base = os.path.join(tmp, "base")
                shutil.copytree(os.path.join(ROOT, "deploy", "kubernetes"), base)
                overlay = os.path.join(tmp, "overlay")
                os.mkdir(overlay)
                with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
                    yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                                    "kind": "Kustomization", "resources": ["../base"],
                                    "components": ["../base/" + c for c in components]}, f)
                p = subprocess.run(["kubectl", "kustomize", overlay], capture_output=True,
                                   text=True, timeout=120)
                self.assertEqual(p.returncode, 0, msg=p.stderr)
                docs = [d for d in yaml.safe_load_all(p.stdout) if d]
                kinds = sorted(d["kind"] for d in docs)
                for d in docs:
                    if d["kind"] != "Namespace":
                        self.assertEqual(d["metadata"].get("namespace"), "gpupipe", msg=d["kind"])
                dep = next(d for d in docs if d["kind"] == "Deployment")
                c = dep["spec"]["template"]["spec"]["containers"][0]
                self.assertEqual(c["image"], "ghcr.io/owner/gpupipe:0.1.0")
                if components:
                    self.assertIn("ServiceMonitor", kinds)
                    # TLS: the kubelet's gRPC probes cannot speak it; exec probes replace them.
                    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                        self.assertNotIn("grpc", c[probe])
                        self.assertEqual(c[probe]["exec"]["command"][:2],
                                         ["/usr/local/bin/gpupipe-entrypoint", "health"])
                    env = {e["name"] for e in c["env"]}
                    self.assertLessEqual({"GPUPIPE_TLS_CERT_FILE", "GPUPIPE_TLS_KEY_FILE",
                                          "GPUPIPE_TOKENS"}, env)
                else:
                    self.assertNotIn("ServiceMonitor", kinds)

    @unittest.skipUnless(shutil.which("promtool"), "promtool is not installed")
    def test_prometheus_config(self):
        p = subprocess.run(["promtool", "check", "config", "--syntax-only",
                            os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, msg=p.stdout + p.stderr)

    @unittest.skipUnless(shutil.which("shellcheck"), "shellcheck is not installed")
    def test_entrypoint_lint(self):
        p = subprocess.run(["shellcheck", ENTRYPOINT], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, msg=p.stdout + p.stderr)


class BrokenCopyTest(unittest.TestCase):
    """Each test breaks a copy of the tree one way and expects the checker's line for it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="check_deploy_test.")
        for rel in INPUTS:
            src, dst = os.path.join(ROOT, rel), os.path.join(self.tmp, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, dst)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, rel):
        return os.path.join(self.tmp, rel)

    def edit_text(self, rel, old, new, count=1):
        with open(self.path(rel)) as f:
            text = f.read()
        self.assertIn(old, text, msg=f"{rel} no longer has {old!r}: update this test")
        with open(self.path(rel), "w") as f:
            f.write(text.replace(old, new, count))

    def edit_yaml(self, rel, change):
        with open(self.path(rel)) as f:
            docs = list(yaml.safe_load_all(f))
        change(docs)
        with open(self.path(rel), "w") as f:
            yaml.safe_dump_all(docs, f, sort_keys=False)

    def edit_container(self, change):
        def f(docs):
            pod = docs[0]["spec"]["template"]["spec"]
            change(pod, pod["containers"][0])
        self.edit_yaml("deploy/kubernetes/deployment.yaml", f)

    def expect(self, *patterns):
        rc, out, err = run_checker(self.tmp)
        self.assertEqual(rc, 1, msg=f"expected a failure; stdout:\n{out}\nstderr:\n{err}")
        for line in out.splitlines():
            self.assertTrue(line.startswith("FAIL "), msg=f"not a failure line: {line!r}")
        for pattern in patterns:
            self.assertRegex(out, pattern)
        return out

    def test_copy_passes(self):
        rc, out, err = run_checker(self.tmp)
        self.assertEqual(rc, 0, msg=out + err)

    def test_security_context_removed(self):
        def change(pod, c):
            del pod["securityContext"]
            del c["securityContext"]
        self.edit_container(change)
        self.expect(r"deployment\.yaml: container gpupiped: securityContext\.runAsNonRoot must be true",
                    r"readOnlyRootFilesystem must be true",
                    r"allowPrivilegeEscalation must be false",
                    r"capabilities\.drop must include ALL",
                    r"seccompProfile\.type must be RuntimeDefault")

    def test_gpu_limit_removed(self):
        def change(pod, c):
            del c["resources"]["limits"]["nvidia.com/gpu"]
            del c["resources"]["requests"]["nvidia.com/gpu"]
        self.edit_container(change)
        self.expect(r"resources\.limits must have nvidia\.com/gpu: 1")

    def test_two_gpus(self):
        def change(pod, c):
            c["resources"]["limits"]["nvidia.com/gpu"] = 2
            c["resources"]["requests"]["nvidia.com/gpu"] = 2
        self.edit_container(change)
        self.expect(r"nvidia\.com/gpu: 1 \(one daemon per GPU\)")

    def test_cpu_and_memory_requests_removed(self):
        def change(pod, c):
            del c["resources"]["requests"]["cpu"]
            del c["resources"]["limits"]["memory"]
        self.edit_container(change)
        self.expect(r"no resources\.requests\.cpu", r"no resources\.limits\.memory")

    def test_unknown_flag_in_deployment(self):
        self.edit_container(lambda pod, c: c["args"].append("--frobnicate=3"))
        self.expect(r"deployment\.yaml: container gpupiped args: unknown gpupiped flag --frobnicate")

    def test_memory_limit_below_pools(self):
        def change(pod, c):
            c["args"] = [a for a in c["args"] if not a.startswith("--max-queued-mib")]
            c["args"].append("--max-queued-mib=8192")
        self.edit_container(change)
        self.expect(r"memory limit 5Gi does not cover the daemon's pools \(9888 MiB")

    def test_grpc_probe_replaced(self):
        def change(pod, c):
            c["livenessProbe"] = {"tcpSocket": {"port": 50051}}
            c["readinessProbe"]["grpc"].pop("service")
        self.edit_container(change)
        self.expect(r"livenessProbe must be a grpc probe on port 50051",
                    r"readinessProbe\.grpc\.service must be gpupipe\.v1\.JobService")

    def test_grace_shorter_than_drain(self):
        self.edit_container(lambda pod, c: pod.update(terminationGracePeriodSeconds=20))
        self.expect(r"terminationGracePeriodSeconds 20 must exceed --shutdown-grace-seconds 30")

    def test_unnamed_port_and_annotation(self):
        def change(pod, c):
            del c["ports"][1]["name"]
        self.edit_container(change)
        self.edit_yaml("deploy/kubernetes/deployment.yaml", lambda docs: docs[0]["spec"]["template"]
                       ["metadata"]["annotations"].update({"prometheus.io/port": "9090"}))
        self.expect(r"containerPort 9464 has no name",
                    r"prometheus\.io/port '9090' is not the metrics containerPort")

    def test_secret_not_optional(self):
        self.edit_container(lambda pod, c: c["env"][0]["valueFrom"]["secretKeyRef"].pop("optional"))
        self.expect(r"env GPUPIPE_TOKENS from Secret gpupiped-tokens must be optional: true")

    def test_kustomization_lists_missing_file(self):
        self.edit_yaml("deploy/kubernetes/kustomization.yaml",
                       lambda docs: docs[0]["resources"].append("missing.yaml"))
        self.expect(r"kustomization\.yaml: resources: lists missing\.yaml, which does not exist")

    def test_manifest_not_listed(self):
        self.edit_yaml("deploy/kubernetes/kustomization.yaml",
                       lambda docs: docs[0]["resources"].remove("poddisruptionbudget.yaml"))
        self.expect(r"poddisruptionbudget\.yaml: not listed in deploy/kubernetes/kustomization\.yaml",
                    r"no PodDisruptionBudget among the resources")

    def test_network_policy_and_service(self):
        os.remove(self.path("deploy/kubernetes/networkpolicy.yaml"))
        self.edit_yaml("deploy/kubernetes/service-headless.yaml",
                       lambda docs: docs[0]["spec"].pop("clusterIP"))
        self.expect(r"lists networkpolicy\.yaml, which does not exist",
                    r"no NetworkPolicy among the resources",
                    r"no headless Service \(clusterIP: None\)")

    def test_invalid_yaml(self):
        with open(self.path("deploy/kubernetes/namespace.yaml"), "a") as f:
            f.write("metadata: [unclosed\n")
        self.expect(r"namespace\.yaml: not valid YAML")

    def test_image_placeholder_upper_case(self):
        self.edit_text("deploy/kubernetes/kustomization.yaml", "ghcr.io/owner/gpupipe",
                       "ghcr.io/OWNER/gpupipe")
        self.expect(r"newName 'ghcr\.io/OWNER/gpupipe' is not a valid image name")

    def test_service_monitor_port(self):
        self.edit_yaml("deploy/kubernetes/components/servicemonitor/servicemonitor.yaml",
                       lambda docs: docs[0]["spec"]["endpoints"][0].update(port="web"))
        self.expect(r"servicemonitor\.yaml: endpoint port 'web' is no port of the selected Service")

    def test_compose(self):
        def change(docs):
            svc = docs[0]["services"]["gpupiped"]
            del svc["deploy"]["resources"]["reservations"]
            del svc["healthcheck"]
            svc["stop_grace_period"] = "20s"
            svc["command"].append("--nope")
        self.edit_yaml("deploy/compose.yaml", change)
        self.edit_text("deploy/prometheus/prometheus.yml", "gpupiped:9464", "gpupiped:9090")
        self.expect(r"compose\.yaml: service gpupiped: deploy\.resources\.reservations\.devices "
                    r"must reserve one nvidia gpu",
                    r"compose\.yaml: service gpupiped: no healthcheck",
                    r"stop_grace_period 20s must exceed --shutdown-grace-seconds 30",
                    r"unknown gpupiped flag --nope",
                    r"prometheus\.yml: no scrape target gpupiped:9464")

    def test_dockerfile(self):
        self.edit_text("Dockerfile", "USER 65532:65532", "USER root")
        self.edit_text("Dockerfile", "80-real;", "")
        self.edit_text("Dockerfile", "EXPOSE 50051 9464", "EXPOSE 50051")
        self.edit_text("Dockerfile", "HEALTHCHECK ", "# HEALTHCHECK ")
        self.expect(r"Dockerfile: the image runs as 'root'", r"CUDA_ARCHITECTURES lacks \[80\]",
                    r"EXPOSE lacks 9464", r"Dockerfile: no HEALTHCHECK")

    def test_entrypoint_flag(self):
        self.edit_text("deploy/docker/entrypoint.sh", "flags+=(--insecure)",
                       "flags+=(--insecure --allow-plaintext)")
        self.expect(r"entrypoint\.sh: flags: unknown gpupiped flag --allow-plaintext")

    def test_systemd(self):
        unit = "deploy/systemd/gpupiped@.service"
        self.edit_text(unit, "LimitMEMLOCK=infinity\n", "")
        self.edit_text(unit, "Environment=CUDA_VISIBLE_DEVICES=%i\n", "")
        self.edit_text(unit, "TimeoutStopSec=45", "TimeoutStopSec=30s")
        self.edit_text(unit, "ExecStart=/opt/gpupipe/bin/gpupiped --device 0",
                       "ExecStart=/usr/local/bin/gpupiped --device 0")
        self.edit_text("deploy/systemd/gpupiped-0.env.example", "--token-file", "--tokens")
        self.expect(r"\[Service\] LimitMEMLOCK=: expected infinity",
                    r"Environment=CUDA_VISIBLE_DEVICES=%i missing",
                    r"TimeoutStopSec must exceed --shutdown-grace-seconds 30",
                    r"ExecStart must run /opt/gpupipe/bin/gpupiped",
                    r"gpupiped-0\.env\.example: GPUPIPE_ARGS: unknown gpupiped flag --tokens")

    def test_flag_removed_from_daemon(self):
        # A flag the files pass that the daemon no longer has.
        self.edit_text("server/flags.cc", "  --shutdown-grace-seconds N", "  --drain-seconds N")
        self.expect(r"deployment\.yaml: container gpupiped args: unknown gpupiped flag "
                    r"--shutdown-grace-seconds",
                    r"gpupiped@\.service: ExecStart: unknown gpupiped flag --shutdown-grace-seconds")


STUB = """#!/bin/bash
# Stands in for {name}: records its arguments, one a line, and its environment.
printf '%s\\n' "$@" > "$STUB_OUT/{name}.args"
env > "$STUB_OUT/{name}.env"
"""


class EntrypointTest(unittest.TestCase):
    """Runs deploy/docker/entrypoint.sh with stand-ins for gpupiped and gpupipe on PATH."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="entrypoint_test.")
        self.bin = os.path.join(self.tmp, "bin")
        self.out = os.path.join(self.tmp, "out")
        self.tmpdir = os.path.join(self.tmp, "tmp")
        for d in (self.bin, self.out, self.tmpdir):
            os.mkdir(d)
        for name in ("gpupiped", "gpupipe"):
            p = os.path.join(self.bin, name)
            with open(p, "w") as f:
                f.write(STUB.format(name=name))
            os.chmod(p, 0o755)
        self.files = {}
        for name in ("cert.pem", "key.pem", "ca.pem", "tokens"):
            p = os.path.join(self.tmp, name)
            with open(p, "w") as f:
                f.write("x\n")
            self.files[name] = p

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_entrypoint(self, args=(), env=None, ok=True):
        e = {"PATH": self.bin + os.pathsep + "/usr/bin:/bin", "STUB_OUT": self.out,
             "TMPDIR": self.tmpdir}
        e.update(env or {})
        p = subprocess.run(["bash", ENTRYPOINT, *args], env=e, capture_output=True, text=True,
                           timeout=30)
        if ok:
            self.assertEqual(p.returncode, 0, msg=p.stderr)
        return p

    def recorded(self, name):
        with open(os.path.join(self.out, name + ".args")) as f:
            args = f.read().splitlines()
        with open(os.path.join(self.out, name + ".env")) as f:
            env = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
        return args, env

    def test_plaintext_says_insecure(self):
        p = self.run_entrypoint()
        args, _ = self.recorded("gpupiped")
        self.assertEqual(args, ["--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9464",
                                "--backend", "cuda", "--insecure"])
        self.assertIn("--insecure", p.stderr)
        self.assertIn("neither TLS", p.stderr)

    def test_tokens_from_environment(self):
        tokens = "ci:0123456789abcdef0123456789abcdef\nbatch:fedcba9876543210fedcba9876543210"
        p = self.run_entrypoint(env={"GPUPIPE_TOKENS": tokens})
        args, env = self.recorded("gpupiped")
        file = os.path.join(self.tmpdir, "gpupipe-tokens")
        self.assertEqual(args[-2:], ["--token-file", file])
        self.assertNotIn("--insecure", args)
        self.assertEqual(p.stderr, "")
        with open(file) as f:
            self.assertEqual(f.read(), tokens + "\n")
        self.assertEqual(stat.S_IMODE(os.stat(file).st_mode), 0o600)
        self.assertNotIn("GPUPIPE_TOKENS", env)
        self.assertFalse(os.path.exists(file + ".new"))

    def test_tls_and_token_files(self):
        self.run_entrypoint(env={"GPUPIPE_TLS_CERT_FILE": self.files["cert.pem"],
                                 "GPUPIPE_TLS_KEY_FILE": self.files["key.pem"],
                                 "GPUPIPE_TLS_CLIENT_CA_FILE": self.files["ca.pem"],
                                 "GPUPIPE_TOKEN_FILE": self.files["tokens"],
                                 "GPUPIPE_BACKEND": "auto"})
        args, _ = self.recorded("gpupiped")
        self.assertEqual(args, ["--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9464",
                                "--backend", "auto",
                                "--tls-cert", self.files["cert.pem"],
                                "--tls-key", self.files["key.pem"],
                                "--tls-client-ca", self.files["ca.pem"],
                                "--token-file", self.files["tokens"]])

    def test_arguments_win(self):
        self.run_entrypoint(["--backend=auto", "--token-file", self.files["tokens"],
                             "--metrics-listen", ""])
        args, _ = self.recorded("gpupiped")
        self.assertEqual(args, ["--listen", "0.0.0.0:50051", "--backend=auto",
                                "--token-file", self.files["tokens"], "--metrics-listen", ""])

    def test_priority_listener_from_environment_unless_an_argument_names_it(self):
        self.run_entrypoint(env={"GPUPIPE_PRIORITY_LISTEN": "0.0.0.0:50052",
                                 "GPUPIPE_TOKEN_FILE": self.files["tokens"]})
        args, _ = self.recorded("gpupiped")
        self.assertEqual(args, ["--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9464",
                                "--priority-listen", "0.0.0.0:50052", "--backend", "cuda",
                                "--token-file", self.files["tokens"]])
        self.run_entrypoint(["--priority-listen=127.0.0.1:7"],
                            env={"GPUPIPE_PRIORITY_LISTEN": "0.0.0.0:50052"})
        args, _ = self.recorded("gpupiped")
        self.assertEqual(args.count("--priority-listen=127.0.0.1:7"), 1)
        self.assertNotIn("0.0.0.0:50052", args)

    def test_configuration_errors(self):
        cases = [
            ({"GPUPIPE_TLS_CERT_FILE": self.files["cert.pem"]}, "go together"),
            ({"GPUPIPE_TLS_CERT_FILE": self.files["cert.pem"],
              "GPUPIPE_TLS_KEY_FILE": os.path.join(self.tmp, "absent.key")},
             "GPUPIPE_TLS_KEY_FILE=.*absent.key: not a readable file"),
            ({"GPUPIPE_TLS_CLIENT_CA_FILE": self.files["ca.pem"]}, "client certificates need TLS"),
            ({"GPUPIPE_TOKEN_FILE": self.files["tokens"], "GPUPIPE_TOKENS": "a:bbbbbbbbbbbbbbbb"},
             "not both"),
        ]
        for env, message in cases:
            with self.subTest(message=message):
                p = self.run_entrypoint(env=env, ok=False)
                self.assertEqual(p.returncode, 2)
                self.assertRegex(p.stderr, message)
                self.assertFalse(os.path.exists(os.path.join(self.out, "gpupiped.args")))

    def test_health_plaintext(self):
        self.run_entrypoint(["health"], env={"GPUPIPE_TOKEN": "t", "GPUPIPE_TLS_CA": "/x",
                                             "GPUPIPE_TARGET": "elsewhere:1"})
        args, env = self.recorded("gpupipe")
        self.assertEqual(args, ["--target", "127.0.0.1:50051", "--deadline", "3", "health"])
        for name in ("GPUPIPE_TOKEN", "GPUPIPE_TLS_CA", "GPUPIPE_TARGET"):
            self.assertNotIn(name, env)

    def test_health_mutual_tls(self):
        self.run_entrypoint(["health", "--service", "gpupipe.v1.JobService"],
                            env={"GPUPIPE_TLS_CERT_FILE": self.files["cert.pem"],
                                 "GPUPIPE_TLS_KEY_FILE": self.files["key.pem"],
                                 "GPUPIPE_TLS_CLIENT_CA_FILE": self.files["ca.pem"],
                                 "GPUPIPE_TLS_CA_FILE": self.files["ca.pem"],
                                 "GPUPIPE_LISTEN": "0.0.0.0:6000"})
        args, _ = self.recorded("gpupipe")
        self.assertEqual(args, ["--target", "127.0.0.1:6000", "--deadline", "3",
                                "--tls-ca", self.files["ca.pem"],
                                "--tls-cert", self.files["cert.pem"],
                                "--tls-key", self.files["key.pem"],
                                "health", "--service", "gpupipe.v1.JobService"])

    def test_help_goes_straight_to_the_daemon(self):
        p = self.run_entrypoint(["--help"])
        args, _ = self.recorded("gpupiped")
        self.assertEqual(args, ["--help"])
        self.assertEqual(p.stderr, "")

    def test_other_command(self):
        self.run_entrypoint(["gpupipe", "describe"])
        args, _ = self.recorded("gpupipe")
        self.assertEqual(args, ["describe"])


if __name__ == "__main__":
    unittest.main()
