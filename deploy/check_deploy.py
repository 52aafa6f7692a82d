#!/usr/bin/python3
"""Checks gpupipe's deployment files against each other and against the daemon's flags.

usage: deploy/check_deploy.py [ROOT]

ROOT is the repository root (default: the directory above deploy/). Reads the Dockerfile,
.dockerignore, every YAML file under deploy/ (all documents of each), the entrypoint, the
systemd unit and its example environment file, and the flags in gpupiped's usage text
(server/flags.cc). Prints one line per failed check, `FAIL <file>: <what>`, and exits 1 when
any failed; otherwise prints a summary and exits 0.

It is the validator where no cluster or schema tool is at hand: it checks the properties the
deployment relies on (one GPU per pod, the security context, probes and grace periods that
match the daemon's drain, the memory limit that covers the daemon's pools, the
kustomization's file lists, every flag passed to gpupiped), not the whole Kubernetes schema.
"""

import os
import re
import shlex
import sys

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("check_deploy: needs PyYAML (Debian/Ubuntu: apt-get install python3-yaml, as "
             "scripts/install-deps.sh does)")

GRPC_PORT = 50051
METRICS_PORT = 9464
JOB_SERVICE = "gpupipe.v1.JobService"
# After --shutdown-grace-seconds the daemon stops running jobs and exits within 2 s more
# (server/main.cc); a supervisor's deadline must leave it that too.
STOP_SECONDS = 2
# Architectures the image must carry code for (Ampere to Blackwell).
REQUIRED_ARCHS = {80, 86, 89, 90, 100, 120}
# Host buffers per lane: kInputBuffers + kSlots chunk-sized pinned buffers
# (server/engine/backends/cuda/lane_pool.h); lanes are 3 priorities x --streams-per-priority.
PINNED_BUFFERS_PER_LANE = 7
PRIORITY_LEVELS = 3


class Checker:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.checks = 0
        self.failures = []
        self.flags, self.defaults = self._daemon_flags()

    # -- reporting ------------------------------------------------------------------------

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def check(self, ok, path, message):
        self.checks += 1
        if not ok:
            self.failures.append(f"FAIL {self.rel(path)}: {message}")
        return ok

    def fail(self, path, message):
        return self.check(False, path, message)

    # -- gpupiped's flags -----------------------------------------------------------------

    def _daemon_flags(self):
        path = os.path.join(self.root, "server", "flags.cc")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            self.fail(path, f"cannot read the daemon's flags: {e.strerror}")
            return set(), {}
        m = re.search(r'std::string Usage\(\)\s*\{\s*return R"\((.*?)\)"', text, re.S)
        if not self.check(m is not None, path, "no Usage() text (R\"(...)\") to read flags from"):
            return set(), {}
        usage = m.group(1)
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", usage))
        # A flag's entry runs from its name at the start of a line to the next such line.
        defaults = {}
        entries = re.split(r"\n  (?=--)", usage)
        for entry in entries:
            names = re.findall(r"^(--[a-z][a-z0-9-]*)", entry)
            d = re.search(r"default (\d+)\)", entry)
            if names and d:
                defaults[names[0]] = int(d.group(1))
        self.check(len(flags) > 10, path, f"found only {len(flags)} flags in Usage()")
        return flags, defaults

    def check_flags(self, path, where, args):
        """Every --flag in `args` (a list of words) must be one of gpupiped's."""
        for word in args:
            if not isinstance(word, str) or not word.startswith("--") or word == "--":
                continue
            name = word.split("=", 1)[0]
            self.check(name in self.flags, path,
                       f"{where}: unknown gpupiped flag {name} (not in server/flags.cc's usage)")

    @staticmethod
    def flag_value(args, name):
        """The last value of --name in `args` (`--name V` or `--name=V`), or None."""
        value = None
        for i, word in enumerate(args):
            if not isinstance(word, str):
                continue
            if word == name and i + 1 < len(args):
                value = args[i + 1]
            elif word.startswith(name + "="):
                value = word.split("=", 1)[1]
        return value

    def int_flag(self, args, name):
        v = self.flag_value(args, name)
        if v is not None:
            try:
                return int(v)
            except ValueError:
                return None
        return self.defaults.get(name)

    def grace(self, args):
        g = self.int_flag(args, "--shutdown-grace-seconds")
        return 10 if g is None else g

    # -- files ----------------------------------------------------------------------------

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def read(self, path):
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            self.fail(path, f"cannot read: {e.strerror}")
            return None

    def load_yaml(self, path):
        """The documents of a YAML file (empty ones left out), or None when it does not parse."""
        text = self.read(path)
        if text is None:
            return None
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as e:
            self.fail(path, f"not valid YAML: {str(e).splitlines()[0]}")
            return None
        self.checks += 1
        return docs

    def yaml_files(self, top):
        found = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith((".yaml", ".yml")):
                    found.append(os.path.join(dirpath, name))
        return found

    # -- the whole tree -------------------------------------------------------------------

    def run(self):
        deploy = self.path("deploy")
        self.docs = {}
        for f in self.yaml_files(deploy):
            docs = self.load_yaml(f)
            if docs is not None:
                self.docs[f] = docs
        self.check_kubernetes()
        self.check_compose()
        self.check_dockerfile()
        self.check_entrypoint()
        self.check_systemd()
        return not self.failures

    # -- Kubernetes -----------------------------------------------------------------------

    def check_kubernetes(self):
        kdir = self.path("deploy", "kubernetes")
        base = os.path.join(kdir, "kustomization.yaml")
        if not self.check(os.path.isfile(base), base, "missing: the kustomize base"):
            return
        kustomizations = {}
        for f in self.yaml_files(kdir):
            if os.path.basename(f) in ("kustomization.yaml", "kustomization.yml"):
                kustomizations[os.path.dirname(f)] = f
        base_resources = set()
        for d, kf in kustomizations.items():
            resources, _ = self.check_kustomization(d, kf, kind_base=(kf == base))
            if kf == base:
                base_resources = resources
        # Every manifest belongs to a kustomization.
        for f in self.yaml_files(kdir):
            if os.path.dirname(f) not in kustomizations:
                self.fail(f, "in a folder without a kustomization.yaml: nothing applies it")

        # The objects the base applies by itself (its optional components aside).
        base_docs = []
        for f in sorted(base_resources):
            for doc in self.docs.get(f, []):
                if isinstance(doc, dict):
                    base_docs.append((f, doc))
        by_kind = {}
        for f, doc in base_docs:
            by_kind.setdefault(doc.get("kind"), []).append((f, doc))

        deployments = by_kind.get("Deployment", [])
        if not self.check(len(deployments) == 1, base,
                          f"expected one Deployment among the resources, found {len(deployments)}"):
            return
        f, dep = deployments[0]
        kustomization = self.docs.get(base, [{}])[0] or {}
        pod_labels = self.check_deployment(f, dep, kustomization)

        self.check_headless_service(by_kind.get("Service", []), pod_labels, base)
        pdbs = by_kind.get("PodDisruptionBudget", [])
        if self.check(pdbs, base, "no PodDisruptionBudget among the resources"):
            for pf, pdb in pdbs:
                spec = pdb.get("spec") or {}
                self.check("maxUnavailable" in spec or "minAvailable" in spec, pf,
                           "PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
                self.check(self.selects(spec.get("selector"), pod_labels), pf,
                           "PodDisruptionBudget's selector does not match the pods")
        nps = by_kind.get("NetworkPolicy", [])
        if self.check(nps, base, "no NetworkPolicy among the resources"):
            for nf, np in nps:
                self.check_network_policy(nf, np, pod_labels)
        self.check_service_monitors(kdir, pod_labels)

    def check_kustomization(self, d, kf, kind_base):
        """Checks one kustomization's lists; returns (resource files, patch files) it names."""
        resources, patches = set(), set()
        docs = self.docs.get(kf)
        if not docs or not isinstance(docs[0], dict):
            self.fail(kf, "empty or not a mapping")
            return resources, patches
        k = docs[0]
        kind = k.get("kind", "Kustomization")
        self.check(kind in ("Kustomization", "Component"), kf,
                   f"kind {kind}: expected Kustomization or Component")
        for key in ("resources", "components"):
            for entry in k.get(key) or []:
                if not isinstance(entry, str):
                    self.fail(kf, f"{key}: {entry!r} is not a path")
                    continue
                if "://" in entry or entry.startswith(("github.com/", "git@")):
                    continue
                p = os.path.normpath(os.path.join(d, entry))
                if os.path.isdir(p):
                    self.check(os.path.isfile(os.path.join(p, "kustomization.yaml")), kf,
                               f"{key}: {entry} is a folder without a kustomization.yaml")
                elif self.check(os.path.isfile(p), kf,
                                f"{key}: lists {entry}, which does not exist"):
                    resources.add(p)
        for entry in list(k.get("patches") or []) + list(k.get("patchesStrategicMerge") or []):
            path = entry.get("path") if isinstance(entry, dict) else entry
            if not isinstance(path, str) or "\n" in path:
                continue  # an inline patch
            p = os.path.normpath(os.path.join(d, path))
            if self.check(os.path.isfile(p), kf, f"patches: lists {path}, which does not exist"):
                patches.add(p)
        # Every manifest beside the kustomization is listed (examples excepted).
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if (not name.endswith((".yaml", ".yml")) or name.startswith("kustomization.")
                    or ".example." in name or not os.path.isfile(p)):
                continue
            self.check(p in resources or p in patches, p,
                       f"not listed in {self.rel(kf)} (list it, or name it *.example.yaml)")
        if kind_base:
            self.check(kind == "Kustomization", kf, "the base must be a Kustomization")
            self.check(bool(k.get("namespace")), kf, "no namespace: set")
        return resources, patches

    def check_deployment(self, f, dep, kustomization):
        spec = dep.get("spec") or {}
        tmpl = spec.get("template") or {}
        pod = tmpl.get("spec") or {}
        meta = tmpl.get("metadata") or {}
        pod_labels = meta.get("labels") or {}
        self.check(self.selects(spec.get("selector"), pod_labels), f,
                   "the Deployment's selector does not match its pod template's labels")
        containers = pod.get("containers") or []
        if not self.check(containers, f, "the Deployment has no containers"):
            return pod_labels
        c = next((c for c in containers if c.get("name") == "gpupiped"), containers[0])
        name = c.get("name", "?")
        where = f"container {name}"

        # The image: named by the kustomization's images: entry.
        images = kustomization.get("images") or []
        entry = next((i for i in images if isinstance(i, dict) and i.get("name") == c.get("image")),
                     None)
        if self.check(entry is not None, f,
                      f"{where}: image {c.get('image')!r} has no images: entry in the "
                      "kustomization (which the operator sets with kustomize edit set image)"):
            new = entry.get("newName", "")
            self.check(bool(re.fullmatch(r"[a-z0-9]+([._-][a-z0-9]+)*(\.[a-z0-9-]+)*(:\d+)?"
                                         r"(/[a-z0-9]+([._/-][a-z0-9]+)*)+", new)), f,
                       f"images: newName {new!r} is not a valid image name (lower case)")
            self.check(bool(entry.get("newTag") or entry.get("digest")), f,
                       "images: the entry sets no newTag or digest")

        args = [str(a) for a in (c.get("args") or [])] + [str(a) for a in (c.get("command") or [])]
        self.check_flags(f, f"{where} args", args)
        backend = self.flag_value(args, "--backend")
        self.check(backend == "cuda", f, f"{where}: pass --backend cuda (got {backend!r})")

        # One GPU, and CPU and memory bounds.
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        self.check(str(limits.get("nvidia.com/gpu")) == "1", f,
                   f"{where}: resources.limits must have nvidia.com/gpu: 1 (one daemon per GPU)")
        if "nvidia.com/gpu" in requests:
            self.check(str(requests["nvidia.com/gpu"]) == "1", f,
                       f"{where}: resources.requests nvidia.com/gpu must equal the limit, 1")
        for kind, values in (("requests", requests), ("limits", limits)):
            for r in ("cpu", "memory"):
                self.check(r in values, f, f"{where}: no resources.{kind}.{r}")
        self.check_memory(f, where, args, limits.get("memory"))

        # Security context: the container's settings over the pod's.
        psc = pod.get("securityContext") or {}
        csc = c.get("securityContext") or {}
        merged = dict(psc, **csc)
        self.check(merged.get("runAsNonRoot") is True, f, f"{where}: securityContext.runAsNonRoot must be true")
        self.check(merged.get("runAsUser", 1) != 0, f, f"{where}: securityContext.runAsUser must not be 0")
        self.check(csc.get("readOnlyRootFilesystem") is True, f,
                   f"{where}: securityContext.readOnlyRootFilesystem must be true")
        self.check(csc.get("allowPrivilegeEscalation") is False, f,
                   f"{where}: securityContext.allowPrivilegeEscalation must be false")
        drop = ((csc.get("capabilities") or {}).get("drop")) or []
        self.check("ALL" in drop, f, f"{where}: securityContext.capabilities.drop must include ALL")
        self.check(((merged.get("seccompProfile") or {}).get("type")) in ("RuntimeDefault", "Localhost"),
                   f, f"{where}: securityContext.seccompProfile.type must be RuntimeDefault")
        self.check(not csc.get("privileged"), f, f"{where}: must not be privileged")
        mounts = {m.get("mountPath") for m in c.get("volumeMounts") or []}
        self.check("/tmp" in mounts, f,
                   f"{where}: mount a writable volume at /tmp (the root filesystem is read-only)")

        # Ports: all named; gRPC and metrics where the image's entrypoint listens.
        ports = c.get("ports") or []
        for p in ports:
            self.check(bool(p.get("name")), f,
                       f"{where}: containerPort {p.get('containerPort')} has no name")
        by_name = {p.get("name"): p.get("containerPort") for p in ports}
        self.check(by_name.get("grpc") == GRPC_PORT, f,
                   f"{where}: no port named grpc with containerPort {GRPC_PORT}")
        metrics_port = by_name.get("metrics")
        self.check(metrics_port == METRICS_PORT, f,
                   f"{where}: no port named metrics with containerPort {METRICS_PORT}")
        ann = meta.get("annotations") or {}
        if "prometheus.io/scrape" in ann or "prometheus.io/port" in ann:
            self.check(str(ann.get("prometheus.io/port")) == str(metrics_port), f,
                       f"pod annotation prometheus.io/port {ann.get('prometheus.io/port')!r} is not "
                       f"the metrics containerPort {metrics_port}")
        else:
            self.fail(f, "no prometheus.io/scrape and prometheus.io/port pod annotations")

        # Probes: the kubelet's gRPC probes on the daemon's health service.
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            p = c.get(probe)
            if not self.check(isinstance(p, dict), f, f"{where}: no {probe}"):
                continue
            if probe == "startupProbe":
                continue
            grpc = p.get("grpc") or {}
            self.check(grpc.get("port") == GRPC_PORT, f,
                       f"{where}: {probe} must be a grpc probe on port {GRPC_PORT}")
        ready = (c.get("readinessProbe") or {}).get("grpc") or {}
        self.check(ready.get("service") == JOB_SERVICE, f,
                   f"{where}: readinessProbe.grpc.service must be {JOB_SERVICE}, which turns "
                   "NOT_SERVING when the daemon drains")

        # Grace: the kubelet waits for the drain.
        grace = self.grace(args)
        tgps = pod.get("terminationGracePeriodSeconds", 30)
        pre_stop = 0
        cmd = (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command")
        if cmd and len(cmd) == 2 and cmd[0].endswith("sleep"):
            pre_stop = int(cmd[1])
        self.check(isinstance(tgps, int) and tgps > grace + STOP_SECONDS + pre_stop, f,
                   f"terminationGracePeriodSeconds {tgps} must exceed --shutdown-grace-seconds "
                   f"{grace} plus the {STOP_SECONDS} s the daemon takes to stop after it"
                   + (f" plus the preStop sleep {pre_stop}" if pre_stop else ""))

        # Secrets the base refers to are optional, so that it applies before they exist.
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref is not None:
                self.check(ref.get("optional") is True, f,
                           f"{where}: env {e.get('name')} from Secret {ref.get('name')} must be "
                           "optional: true (the Secret is the operator's to create)")
        for v in pod.get("volumes") or []:
            if "secret" in v:
                self.check((v["secret"] or {}).get("optional") is True, f,
                           f"volume {v.get('name')}: Secret volume must be optional: true")
        return pod_labels

    @staticmethod
    def mib(quantity, binary_units=False):
        """A memory quantity in MiB, or None: Kubernetes's ("5Gi", "5G" = 5e9 bytes), or with
        binary_units Docker's, whose k, m, g, t are powers of 1024 ("5g", "5G")."""
        if quantity is None:
            return None
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGTkmgt]i?[Bb]?|)", str(quantity).strip())
        if not m:
            return None
        n, unit = float(m.group(1)), m.group(2).lower().rstrip("b")
        scale = {"": 1 / 2**20, "k": 1e3 / 2**20, "ki": 1 / 1024, "m": 1e6 / 2**20, "mi": 1,
                 "g": 1e9 / 2**20, "gi": 1024, "t": 1e12 / 2**20, "ti": 2**20}
        if binary_units and unit in ("k", "m", "g", "t"):
            unit += "i"
        if unit not in scale:
            return None
        return n * scale[unit]

    def pools_mib(self, args):
        get = lambda name: self.int_flag(args, name) or 0  # noqa: E731
        lanes = PRIORITY_LEVELS * get("--streams-per-priority")
        return (lanes * PINNED_BUFFERS_PER_LANE * get("--chunk-mib")
                + get("--input-ring-total-mib") + get("--max-queued-mib")
                + lanes * get("--max-input-mib") + get("--rpc-memory-mib"))

    def check_memory(self, f, where, args, limit, binary_units=False):
        pools = self.pools_mib(args)
        have = self.mib(limit, binary_units)
        if limit is None:
            return
        self.check(have is not None and have > pools, f,
                   f"{where}: memory limit {limit} does not cover the daemon's pools "
                   f"({pools} MiB from --streams-per-priority, --chunk-mib, "
                   "--input-ring-total-mib, --max-queued-mib, --max-input-mib, --rpc-memory-mib)")

    @staticmethod
    def selects(selector, labels):
        if not isinstance(selector, dict):
            return False
        match = selector.get("matchLabels", selector) or {}
        return bool(match) and all(labels.get(k) == v for k, v in match.items())

    def check_headless_service(self, services, pod_labels, base):
        headless = []
        for f, s in services:
            spec = s.get("spec") or {}
            if spec.get("clusterIP") == "None":
                headless.append((f, spec))
        if not self.check(headless, base, "no headless Service (clusterIP: None) among the resources"):
            return
        ok = False
        for f, spec in headless:
            if not self.selects(spec.get("selector"), pod_labels):
                continue
            ports = [p.get("port") for p in spec.get("ports") or []]
            if GRPC_PORT in ports:
                ok = True
                self.check(spec.get("publishNotReadyAddresses") is not True, f,
                           "the headless Service must not publish pods that are not ready")
        self.check(ok, base, f"no headless Service selects the pods on port {GRPC_PORT}")

    def check_network_policy(self, f, np, pod_labels):
        spec = np.get("spec") or {}
        self.check(self.selects(spec.get("podSelector"), pod_labels), f,
                   "the NetworkPolicy's podSelector does not match the pods")
        types = spec.get("policyTypes") or []
        self.check("Ingress" in types, f, "the NetworkPolicy's policyTypes lack Ingress")
        ports = set()
        for rule in spec.get("ingress") or []:
            for p in rule.get("ports") or []:
                ports.add(p.get("port"))
        for port, name in ((GRPC_PORT, "grpc"), (METRICS_PORT, "metrics")):
            self.check(port in ports or name in ports, f,
                       f"the NetworkPolicy admits nothing on port {port}")

    def check_service_monitors(self, kdir, pod_labels):
        monitors, services = [], []
        for f, docs in self.docs.items():
            if not f.startswith(kdir + os.sep):
                continue
            for d in docs:
                if isinstance(d, dict) and d.get("kind") == "ServiceMonitor":
                    monitors.append((f, d))
                elif isinstance(d, dict) and d.get("kind") == "Service":
                    services.append((f, d))
        if not self.check(monitors, kdir, "no ServiceMonitor (components/servicemonitor)"):
            return
        for f, m in monitors:
            self.check(m.get("apiVersion") == "monitoring.coreos.com/v1", f,
                       "ServiceMonitor's apiVersion must be monitoring.coreos.com/v1")
            spec = m.get("spec") or {}
            selected = [s for _, s in services
                        if self.selects(spec.get("selector"), (s.get("metadata") or {}).get("labels") or {})]
            if not self.check(selected, f, "the ServiceMonitor selects no Service of deploy/kubernetes"):
                continue
            for ep in spec.get("endpoints") or []:
                port = ep.get("port")
                targets = [p for s in selected for p in (s.get("spec") or {}).get("ports") or []
                           if p.get("name") == port]
                self.check(any(p.get("targetPort") in ("metrics", METRICS_PORT) for p in targets), f,
                           f"endpoint port {port!r} is no port of the selected Service that "
                           f"targets the metrics port {METRICS_PORT}")

    # -- Docker Compose -------------------------------------------------------------------

    def check_compose(self):
        f = self.path("deploy", "compose.yaml")
        if not self.check(os.path.isfile(f), f, "missing"):
            return
        docs = self.docs.get(f) or [{}]
        services = (docs[0] or {}).get("services") or {}
        name, svc = next(((n, s) for n, s in services.items()
                          if n == "gpupiped" or (s or {}).get("build")), (None, None))
        if not self.check(svc is not None, f, "no gpupiped service"):
            return
        where = f"service {name}"
        devices = ((((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {})
                   .get("devices")) or []
        gpu = [d for d in devices if d.get("driver") == "nvidia" and "gpu" in (d.get("capabilities") or [])]
        self.check(gpu and (str(gpu[0].get("count")) == "1" or len(gpu[0].get("device_ids") or []) == 1),
                   f, f"{where}: deploy.resources.reservations.devices must reserve one nvidia gpu")
        hc = svc.get("healthcheck") or {}
        self.check(bool(hc.get("test")) and not hc.get("disable"), f, f"{where}: no healthcheck")
        self.check(svc.get("read_only") is True, f, f"{where}: read_only must be true")
        tmpfs = svc.get("tmpfs") or []
        tmpfs = [tmpfs] if isinstance(tmpfs, str) else tmpfs
        self.check(any(str(t).split(":")[0] == "/tmp" for t in tmpfs), f, f"{where}: no tmpfs at /tmp")
        self.check("ALL" in (svc.get("cap_drop") or []), f, f"{where}: cap_drop must include ALL")
        self.check(any(str(o).startswith("no-new-privileges") and not str(o).endswith(":false")
                       for o in svc.get("security_opt") or []), f,
                   f"{where}: security_opt must include no-new-privileges:true")
        self.check(svc.get("restart") not in (None, "no"), f, f"{where}: no restart policy")
        command = svc.get("command") or []
        args = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        self.check_flags(f, f"{where} command", args)
        grace = self.grace(args)
        stop = self.seconds(svc.get("stop_grace_period", "10s"))
        self.check(stop is not None and stop > grace + STOP_SECONDS, f,
                   f"{where}: stop_grace_period {svc.get('stop_grace_period', '10s (default)')} must "
                   f"exceed --shutdown-grace-seconds {grace} plus {STOP_SECONDS} s")
        published = " ".join(str(p) for p in svc.get("ports") or [])
        for port in (GRPC_PORT, METRICS_PORT):
            self.check(re.search(rf"(^|[: ]){port}(/tcp)?($| )", published) is not None, f,
                       f"{where}: port {port} is not published")
        limit = (((svc.get("deploy") or {}).get("resources") or {}).get("limits") or {}).get("memory")
        if limit is not None:
            self.check_memory(f, where, args, limit, binary_units=True)

        prom = services.get("prometheus")
        if not self.check(prom is not None and str(prom.get("image", "")).startswith("prom/prometheus"),
                          f, "no prometheus service with a prom/prometheus image"):
            return
        config = None
        for v in prom.get("volumes") or []:
            src = v.split(":")[0] if isinstance(v, str) else (v or {}).get("source")
            if src and src.endswith(("prometheus.yml", "prometheus.yaml")):
                config = os.path.normpath(os.path.join(os.path.dirname(f), src))
        if not self.check(config is not None and os.path.isfile(config), f,
                          "the prometheus service mounts no prometheus.yml that exists"):
            return
        targets = []
        for job in ((self.docs.get(config) or [{}])[0] or {}).get("scrape_configs") or []:
            for sc in job.get("static_configs") or []:
                targets += sc.get("targets") or []
        self.check(f"{name}:{METRICS_PORT}" in targets, config,
                   f"no scrape target {name}:{METRICS_PORT} (got {targets})")

    @staticmethod
    def seconds(value):
        """A compose or systemd duration ("40s", "1m30s", "1min 30s", 45) in seconds, or None."""
        if isinstance(value, (int, float)):
            return float(value)
        total, text = 0.0, str(value).replace(" ", "")
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return float(text)
        units = {"h": 3600, "m": 60, "min": 60, "s": 1, "sec": 1, "ms": 0.001}
        parts = re.findall(r"(\d+(?:\.\d+)?)(min|ms|sec|h|m|s)", text)
        if not parts or "".join(n + u for n, u in parts) != text:
            return None
        for n, u in parts:
            total += float(n) * units[u]
        return total

    # -- Dockerfile -----------------------------------------------------------------------

    def check_dockerfile(self):
        f = self.path("Dockerfile")
        text = self.read(f)
        if text is None:
            return
        # Instructions, with continuation lines joined and comments dropped.
        lines = []
        for line in re.sub(r"\\\n", " ", "\n".join(
                l for l in text.splitlines() if not l.lstrip().startswith("#"))).splitlines():
            if line.strip():
                word, _, rest = line.strip().partition(" ")
                lines.append((word.upper(), rest.strip()))
        health = [r for w, r in lines if w == "HEALTHCHECK"]
        self.check(health and not health[-1].upper().startswith("NONE"), f, "no HEALTHCHECK")
        users = [r for w, r in lines if w == "USER"]
        user = users[-1] if users else "root"
        self.check(user.split(":")[0] not in ("root", "0"), f,
                   f"the image runs as {user!r}: set a non-root USER")
        exposed = {p.split("/")[0] for w, r in lines if w == "EXPOSE" for p in r.split()}
        for port in (GRPC_PORT, METRICS_PORT):
            self.check(str(port) in exposed, f, f"EXPOSE lacks {port}")
        archs = [r for w, r in lines if w == "ARG" and r.startswith("CUDA_ARCHITECTURES=")]
        if self.check(archs, f, "no ARG CUDA_ARCHITECTURES=<default>"):
            value = archs[0].split("=", 1)[1].strip("\"'")
            entries = [e for e in value.split(";") if e]
            real = {int(m.group(1)) for e in entries for m in [re.match(r"(\d+)", e)] if m}
            missing = sorted(REQUIRED_ARCHS - real)
            self.check(not missing, f, f"CUDA_ARCHITECTURES lacks {missing} (code for sm_80 to sm_120)")
            self.check(any(e.endswith("-virtual") or re.fullmatch(r"\d+", e) for e in entries), f,
                       "CUDA_ARCHITECTURES carries no PTX (a -virtual entry) for newer GPUs")
        self.check(re.search(r"-DCMAKE_CUDA_ARCHITECTURES=\$\{?CUDA_ARCHITECTURES\}?", text) is not None,
                   f, "the build does not pass -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}")
        for w, r in lines:
            if w == "COPY" and "entrypoint" in r:
                src = [a for a in r.split() if not a.startswith("--")][0]
                self.check(os.path.isfile(self.path(src)), f, f"COPY {src}: no such file")
            if w in ("ENTRYPOINT", "CMD"):
                try:
                    words = yaml.safe_load(r) if r.startswith("[") else shlex.split(r)
                except yaml.YAMLError:
                    words = shlex.split(r)
                if any("gpupiped" in str(x) or "entrypoint" in str(x) for x in words) or w == "CMD":
                    self.check_flags(f, w, [str(x) for x in words])
        self.check(any(w == "ENTRYPOINT" for w, _ in lines), f, "no ENTRYPOINT")
        ignore = self.path(".dockerignore")
        text = self.read(ignore)
        if text is not None:
            patterns = {l.strip() for l in text.splitlines()}
            for p in ("build*", ".git"):
                self.check(p in patterns, ignore, f"does not exclude {p}")

    # -- the image's entrypoint -----------------------------------------------------------

    def check_entrypoint(self):
        f = self.path("deploy", "docker", "entrypoint.sh")
        text = self.read(f)
        if text is None:
            return
        self.check("set -euo pipefail" in text, f, "no `set -euo pipefail`")
        self.check(re.search(r"^\s*exec gpupiped\b", text, re.M) is not None, f,
                   "does not exec gpupiped (the daemon must be PID 1 to get SIGTERM)")
        self.check("--insecure" in text, f, "never passes --insecure (needed without TLS or tokens)")
        flags = []
        for line in text.splitlines():
            if "flags+=(" in line or re.search(r"\bgiven --", line):
                flags += re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line)
        self.check(flags, f, "no flags+=(...) lines: nothing passes flags to gpupiped")
        self.check_flags(f, "flags", flags)

    # -- systemd --------------------------------------------------------------------------

    def check_systemd(self):
        f = self.path("deploy", "systemd", "gpupiped@.service")
        text = self.read(f)
        if text is None:
            return
        unit, section = {}, None
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            key, _, value = line.partition("=")
            unit.setdefault((section, key.strip()), []).append(value.strip())

        def one(section, key):
            values = unit.get((section, key))
            return values[-1] if values else None

        exec_start = one("Service", "ExecStart") or ""
        words = shlex.split(exec_start)
        if self.check(words and words[0] == "/opt/gpupipe/bin/gpupiped", f,
                      "ExecStart must run /opt/gpupipe/bin/gpupiped (the bundle's daemon)"):
            self.check_flags(f, "ExecStart", words[1:])
            self.check(self.flag_value(words, "--device") == "0", f,
                       "ExecStart must pass --device 0 (the one GPU CUDA_VISIBLE_DEVICES leaves)")
        self.check(any(v == "CUDA_VISIBLE_DEVICES=%i" or v.startswith("CUDA_VISIBLE_DEVICES=%i ")
                       or " CUDA_VISIBLE_DEVICES=%i" in v
                       for v in unit.get(("Service", "Environment"), [])), f,
                   "Environment=CUDA_VISIBLE_DEVICES=%i missing: each instance must see its GPU only")
        env_files = unit.get(("Service", "EnvironmentFile"), [])
        self.check(any("%i" in v for v in env_files), f, "no EnvironmentFile= per instance (%i)")
        required = {
            "Type": ("exec",), "KillSignal": ("SIGTERM",), "Restart": ("on-failure", "always"),
            "LimitMEMLOCK": ("infinity",), "NoNewPrivileges": ("yes", "true"),
            "ProtectSystem": ("strict",), "ProtectHome": ("yes", "true", "read-only", "tmpfs"),
            "PrivateTmp": ("yes", "true"),
        }
        for key, allowed in required.items():
            v = one("Service", key)
            self.check(v in allowed, f, f"[Service] {key}={v or ''}: expected {' or '.join(allowed)}")
        self.check(one("Service", "User") or one("Service", "DynamicUser") in ("yes", "true"), f,
                   "no User= (or DynamicUser=yes): the daemon must not run as root")
        self.check(one("Service", "PrivateDevices") not in ("yes", "true"), f,
                   "PrivateDevices=yes hides /dev/nvidia*")
        grace = self.grace(words)
        stop = self.seconds(one("Service", "TimeoutStopSec") or "90s")
        self.check(stop is not None and stop > grace + STOP_SECONDS, f,
                   f"TimeoutStopSec must exceed --shutdown-grace-seconds {grace} plus {STOP_SECONDS} s")
        self.check(bool(one("Install", "WantedBy")), f, "no [Install] WantedBy=")

        example = self.path("deploy", "systemd", "gpupiped-0.env.example")
        text = self.read(example)
        if text is not None:
            args = None
            for line in text.splitlines():
                if line.startswith("GPUPIPE_ARGS="):
                    args = shlex.split(line.split("=", 1)[1])
                    args = shlex.split(args[0]) if len(args) == 1 else args
            if self.check(args, example, "no GPUPIPE_ARGS= line"):
                self.check_flags(example, "GPUPIPE_ARGS", args)
                self.check(self.flag_value(args, "--listen") is not None, example,
                           "GPUPIPE_ARGS sets no --listen (each instance needs its own port)")


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checker = Checker(root)
    ok = checker.run()
    for line in checker.failures:
        print(line)
    if ok:
        print(f"check_deploy: {checker.checks} checks passed")
        return 0
    print(f"check_deploy: {len(checker.failures)} of {checker.checks} checks failed", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
