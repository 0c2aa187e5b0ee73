"""Issue 40 item 1: pod creation through kube-apiserver with and without cogate's webhook.

The webhook benchmark (``webhook.py``) loads the webhook directly; this one measures what a user
sees: pods created through the API server of a local control plane, the API server calling the
webhook as it does in a cluster (over TLS, its own webhook client, the registration cogate makes:
:func:`cogate.webhook.config.webhook_configuration`, as ``cogate dev`` registers it).

Creators (``_creators.py``, a process of its own: aiohttp, one keep-alive connection each) POST
pods as fast as the API server answers, ``1``, ``16`` and ``100`` at once, in seven set-ups:

- **no webhook** (the baseline): the MutatingWebhookConfiguration deleted, pods labelled;
- **webhook, labelled**: the registration of ``cogate dev`` (the gating entry and the late-label
  entry), pods labelled with an existing PodGroup: each is gated by the webhook;
- **bare webhook, labelled** (the floor of calling any webhook): the same registration pointing at
  ``_bare_webhook.py --echo-uid`` (the bare aiohttp handler of ``webhook.py``'s baseline, same
  certificate) answering every review with the fixed JSON Patch cogate sends for these pods
  (:func:`cogate.webhook.admission.admit` of one of them) and the request's uid: kube-apiserver's
  cost of calling a webhook that does nothing;
- **webhook, unlabelled (late entry on)**: the same registration, pods without the label: the
  late-label entry (no label ``objectSelector``, by design) is called for each;
- **webhook, unlabelled (late entry off)**: the registration without the late-label entry (the
  chart's default, ``webhook.lateLabels.enabled: false``): the ``objectSelector`` keeps every
  unlabelled pod from the webhook;
- **webhook, pre-gated** (issue 40): the chart's default registration (no late-label entry), pods
  labelled and created already carrying cogate's gate (their template has it): the entry's match
  condition (:func:`cogate.webhook.config.needs_admission_expression`) skips them, so the API server
  calls no webhook;
- **policies, labelled**: no webhook; what chart ``admission.mode: policy`` installs
  (:func:`cogate.webhook.policies.admission_policies`): kube-apiserver adds the gate itself (CEL).

Every pod carries a scheduling gate of the benchmark's own (``bench.cogate.dev/hold``), so no
scheduler works on any of them in any set-up and the figure is the create path alone; the
controller is stopped (it would write to the API server during the labelled runs only). Rounds
alternate the set-ups (5 rounds, median: the rounds of one set-up at 100 creators spread by a
quarter on this machine); the pods are deleted between runs (unbound pods go at
once). The webhook's CPU time per create comes from ``/proc``; the connections per create (TLS
connections that carried a review: new ones, as kube-apiserver keeps at most 25 idle per host) from
``cogate_webhook_connections_total`` and the bare webhook's ``/stats``; while the labelled set-up
runs at 100 creators once more, py-spy samples the webhook (where its time goes).

    python bench/bench_admission_rate.py [--quick]       # prints RESULT <json>
"""

from __future__ import annotations

import base64
import functools
import json
import os
import ssl
import urllib.request
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402
from cogate.localcluster.procs import Proc, free_port, spawn, wait_http  # noqa: E402

from cogate.api import DEFAULT_ADOPTED_SCHEDULER_NAMES  # noqa: E402
from cogate.webhook.admission import admit  # noqa: E402
from cogate.webhook.config import CONFIGURATION_NAME, webhook_configuration  # noqa: E402
from cogate.webhook.policies import admission_policies  # noqa: E402
from cogate.webhook.policies import names as policy_names  # noqa: E402

NAME = "admission_rate"
TITLE = "Pod creation through the API server with and without the webhook"
NEEDS_CLUSTER = True
HOLD_GATE = "bench.cogate.dev/hold"
CONCURRENCY = (1, 16, 100)
BARE_SETUP = "bare webhook, labelled"
PRE_GATED_SETUP = "webhook (chart default, late entry off), pre-gated: the template carries cogate's gate"
POLICY_SETUP = "policies in kube-apiserver (admission.mode policy), labelled"
#: Set-ups: (label, registration: "none" | "late-on" | "late-off" | "bare" | "policy", pods: True labelled,
#: False unlabelled, "pre-gated" labelled and carrying cogate's gate); "bare" is "late-on" pointing at the
#: bare webhook.
SETUPS = (("no webhook", "none", True), ("webhook, labelled", "late-on", True),
          (BARE_SETUP, "bare", True),
          ("webhook, unlabelled, late entry on", "late-on", False),
          ("webhook, unlabelled, late entry off", "late-off", False),
          (PRE_GATED_SETUP, "late-off", "pre-gated"),
          (POLICY_SETUP, "policy", True))
TARGET = 0.9  # issue 40: creation with the webhook >= 0.9x of without, at 100 creators
HERE = Path(__file__).resolve().parent


def _webhook_counts(stack: Any, bare: "BareWebhook") -> dict[str, float]:
    """Reviews answered and connections that carried them so far, of cogate's webhook
    (``cogate_webhook_requests_total``, every outcome; ``cogate_webhook_connections_total``) and of
    the bare one (its ``/stats``): ``{"calls", "connections", "bare calls", "bare connections"}``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.webhook_metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    stats = bare.stats()
    return {"calls": cb.metric_value(text, "cogate_webhook_requests_total"),
            "connections": cb.metric_value(text, "cogate_webhook_connections_total"),
            "bare calls": stats["requests"], "bare connections": stats["connections"]}


class BareWebhook:
    """``_bare_webhook.py --echo-uid`` on a free port with the stack's webhook certificate, answering
    every review with ``response`` (an AdmissionReview answer; its uid replaced by each request's)."""

    def __init__(self, stack: Any, response: dict[str, Any]) -> None:
        self.port = free_port()
        (stack.workdir / "bare-response.json").write_text(json.dumps(response))
        self.context = ssl.create_default_context(cafile=str(stack.workdir / "ca.crt"))
        self.proc: Proc = spawn("bare-webhook", [
            sys.executable, str(HERE / "_bare_webhook.py"), "--port", str(self.port), "--echo-uid",
            "--cert", str(stack.workdir / "webhook.crt"), "--key", str(stack.workdir / "webhook.key"),
            "--response", str(stack.workdir / "bare-response.json")], stack.workdir / "bare-webhook.log")
        wait_http(self.proc, f"https://127.0.0.1:{self.port}/healthz", timeout=30, context=self.context)

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/stats", timeout=10, context=self.context) as r:
            return json.loads(r.read())

    def cpu_seconds(self) -> float:
        """User + system CPU seconds so far (``/proc/<pid>/stat``, as :func:`clusterbench.cpu_seconds`)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bare_response(gate: str, pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The answer cogate's webhook gives a review of ``pod`` (created in ``namespace``, defaulted as
    kube-apiserver defaults ``spec.schedulerName``): the bare webhook sends it for every review."""
    obj = json.loads(json.dumps(pod))
    obj["metadata"]["namespace"] = namespace
    obj["spec"].setdefault("schedulerName", "default-scheduler")
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "bench", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "namespace": namespace, "operation": "CREATE", "object": obj}}
    answer = admit(review, gate)
    if answer["response"].get("patchType") != "JSONPatch":
        raise RuntimeError(f"cogate's webhook does not gate the benchmark's pod: {answer}")
    return answer


def register(cluster: Any, stack: Any, mode: str, bare_port: int = 0) -> None:
    """Apply the registration of ``mode`` (:data:`SETUPS`; ``bare``: the ``late-on`` registration with
    the URL of the bare webhook on ``bare_port``); ``none`` deletes it. Waits 2 s: the API server reads
    webhook configurations from an informer."""
    cluster.kubectl("delete", "mutatingwebhookconfiguration", CONFIGURATION_NAME, "--ignore-not-found")
    for kind, names in (("mutatingadmissionpolicybinding,mutatingadmissionpolicy", ("gate",)),
                        ("validatingadmissionpolicybinding,validatingadmissionpolicy", ("refuse", "warn"))):
        cluster.kubectl("delete", kind, *(policy_names(POLICY_RELEASE)[n] for n in names), "--ignore-not-found")
    if mode == "policy":
        path = stack.workdir / "map.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": gate_policy(stack.gate_name)}))
        cluster.kubectl("apply", "-f", str(path))
    elif mode != "none":
        ca = (stack.workdir / "ca.crt").read_bytes()
        port = bare_port if mode == "bare" else stack.webhook_port
        cfg = webhook_configuration({"url": f"https://127.0.0.1:{port}/mutate",
                                     "caBundle": base64.b64encode(ca).decode()}, gate_name=stack.gate_name,
                                    late_labels=None if mode == "late-off" else "Ignore")
        path = stack.workdir / f"mwc-{mode}.json"
        path.write_text(json.dumps(cfg))
        cluster.kubectl("apply", "-f", str(path))
    time.sleep(2.0)


POLICY_RELEASE = "bench-cogate"


def gate_policy(gate: str) -> list[dict[str, Any]]:
    """What chart ``admission.mode: policy`` installs (:func:`cogate.webhook.policies.admission_policies`,
    late-label policy off as the chart's default): the gate added inside kube-apiserver by a
    MutatingAdmissionPolicy, refusal and warnings by ValidatingAdmissionPolicies; no HTTP call."""
    return admission_policies(POLICY_RELEASE, gate_name=gate, adopted=DEFAULT_ADOPTED_SCHEDULER_NAMES)


def _create(cluster: Any, ns: str, body: Path, concurrency: int, count: int, prefix: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(HERE / "_creators.py"), "--kubeconfig", str(cluster.kubeconfig),
                          "--namespace", ns, "--body", str(body), "--concurrency", str(concurrency),
                          "--count", str(count), "--prefix", prefix], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"_creators.py failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _clear(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0, _preload_content=False)
    cb.wait_for(lambda: not core.list_namespaced_pod(ns, limit=1).items, 120, f"pods of {ns} deleted", 0.2)


def _profile(pid: int, seconds: float, out: Path) -> subprocess.Popen | None:
    """py-spy sampling the webhook for ``seconds`` (raw collapsed stacks to ``out``); None without py-spy."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        return None
    return subprocess.Popen([str(spy), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "200",
                             "--format", "raw", "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


#: Where a sample's time goes: the first rule whose marker is in the stack names it (innermost frames
#: are checked first). Markers are function or file names of the stacks py-spy reports.
BUCKETS = (("TLS handshake", ("do_handshake",)),
           ("TLS read/write (encryption, socket)", ("ssl.py", "sslproto.py", "_ssl")),
           ("JSON (orjson decode/encode)", ("orjson", "loads (", "dumps (")),
           ("admission rules (evaluate)", ("admission.py",)),
           ("metrics (prometheus_client)", ("prometheus_client",)),
           ("HTTP parsing and responses (aiohttp)", ("aiohttp",)),
           ("event loop and idle (asyncio, select)", ("asyncio", "selectors", "select (")))


def summarise_profile(path: Path) -> list[list[Any]]:
    """``[[bucket, share %], ...]`` of py-spy's raw output (``stack;frames count`` lines): each sample
    goes to the first bucket of :data:`BUCKETS` one of its frames (innermost first) names."""
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")[::-1]
        total += int(n)
        name = next((b for f in frames for b, marks in BUCKETS if any(m in f for m in marks)), "other Python")
        counts[name] += int(n)
    return [[b, round(100 * c / total, 1)] for b, c in counts.most_common()] if total else []


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    rounds = 1 if quick else 5
    counts = {1: 40, 16: 200, 100: 400} if quick else {1: 150, 16: 600, 100: 1000}
    res: dict[str, dict[int, list[dict[str, Any]]]] = {s[0]: {c: [] for c in CONCURRENCY} for s in SETUPS}
    profile_rows: list[list[Any]] = []
    with cb.control_plane() as cluster, cb.cogate_stack(cluster) as stack:
        stack.processes.pop("controller").stop()  # the create path alone (module doc)
        api = cb.api_client(cluster)
        ns = cb.new_namespace(api, "adm")
        cb.create_pod_group(api, ns, cb.pod_group("hold", 1_000_000))
        tmp = Path(tempfile.mkdtemp(prefix="cogate-bench-adm-"))
        bodies = {}
        for labelled in (True, False, "pre-gated"):
            body = cb.pod("x", group="hold" if labelled else None, gate=HOLD_GATE)
            if labelled == "pre-gated":
                body["spec"]["schedulingGates"].append({"name": stack.gate_name})
            bodies[labelled] = tmp / f"pod-{labelled}.json"
            bodies[labelled].write_text(json.dumps(body))
        webhook_pid = stack.processes["webhook"].pid
        bare = BareWebhook(stack, bare_response(stack.gate_name, json.loads(bodies[True].read_text()), ns))
        try:
            for c, n in counts.items():  # warm-up: connections, caches (not counted)
                _create(cluster, ns, bodies[True], c, min(n, 100), f"warm{c}")
                _clear(api, ns)
            for r in range(rounds):
                order = SETUPS if r % 2 == 0 else SETUPS[::-1]
                for label, mode, labelled in order:
                    register(cluster, stack, mode, bare.port)
                    for c in CONCURRENCY:
                        create = functools.partial(_create, cluster, ns, bodies[labelled], c, counts[c], f"r{r}c{c}")
                        out = _measured(cluster, stack, bare, create, mode == "bare")
                        res[label][c].append(out)
                        cb.log(f"{NAME}: round {r} {label} c={c}: {out}")
                        _clear(api, ns)
        finally:
            bare.proc.stop()
        register(cluster, stack, "late-on")
        raw = tmp / "webhook.pyspy.txt"
        spy = _profile(webhook_pid, 6 if quick else 10, raw)
        if spy is not None:
            time.sleep(0.5)
            deadline = time.monotonic() + (6 if quick else 10)
            i = 0
            while time.monotonic() < deadline - 1:
                _create(cluster, ns, bodies[True], 100, counts[100], f"prof{i}")
                _clear(api, ns)
                i += 1
            spy.wait(60)
            if raw.exists():
                profile_rows = summarise_profile(raw)
        api.close()
    return _result(res, profile_rows, rounds, counts, out_dir)


def _cpu_snapshot(cluster: Any, stack: Any, bare: BareWebhook) -> dict[str, float]:
    return {**cb.cpu_seconds(cluster, stack), "bare-webhook": bare.cpu_seconds()}


def _measured(cluster: Any, stack: Any, bare: BareWebhook, create: Any, is_bare: bool) -> dict[str, Any]:
    """``create()``'s result (``_creators.py``'s figures) with, per pod created, the reviews and new
    connections of the webhook the set-up calls (the bare one when ``is_bare``) and each process's
    CPU ms (``cpu ms per create``; the bare webhook's as ``bare-webhook``)."""
    cpu0, counts0 = _cpu_snapshot(cluster, stack, bare), _webhook_counts(stack, bare)
    out = create()
    cpu = cb.stats_delta(cpu0, _cpu_snapshot(cluster, stack, bare))
    counts = cb.stats_delta(counts0, _webhook_counts(stack, bare))
    n = max(1, out["created"])
    which = "bare " if is_bare else ""
    out["webhook calls per create"] = round(counts[which + "calls"] / n, 2)
    out["webhook connections per create"] = round(counts[which + "connections"] / n, 3)
    out["cpu ms per create"] = {k: round(v * 1000 / n, 3) for k, v in cpu.items() if v > 0}
    return out


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 2)


def _cpu(runs: list[dict[str, Any]], process: str) -> float:
    """Median CPU ms per create of ``process`` (0 when it did not run)."""
    return round(statistics.median(r["cpu ms per create"].get(process, 0.0) for r in runs), 2)


#: kube-apiserver's webhook client, read in the Go module cache at the version localcluster builds
#: (k8s.io/apiserver and k8s.io/client-go v0.36.3, k8s.io/apimachinery v0.36.3): file:line and what it says.
CLIENT_SOURCES = (
    "client-go transport/cache.go:45 and :151: the webhook client's http.Transport keeps at most "
    "idleConnsPerHost = 25 idle connections per host (MaxIdleConnsPerHost; MaxConnsPerHost is not set, so "
    "connections are not capped): a call that finds no idle connection dials and handshakes a new one, and a "
    "connection handed back while 25 are idle is closed",
    "apiserver pkg/util/webhook/client.go:182-185: a webhook registered by service (the chart's registration) "
    "always gets NextProtos [http/1.1] (kubernetes issue 75791: HTTP/2 would send every call of a replica set "
    "down one connection to one pod); :236-241 and :246-257: a webhook registered by URL gets http/1.1 too "
    "unless its host is localhost or a loopback address",
    "apimachinery pkg/util/net/http.go:131-144 and :196-209 (SetTransportDefaults, allowsHTTP2): without "
    "NextProtos the transport is configured for HTTP/2 and would use it if the server offered h2 by ALPN; "
    "only a loopback URL webhook (as cogate dev and this benchmark register) gets there, and aiohttp offers "
    "no h2, so every set-up here speaks HTTP/1.1, as a chart install does",
)


def _at100(res: dict[str, dict[int, list[dict[str, Any]]]], label: str, key: str) -> float | None:
    """Median of ``key`` over the 100-creator runs of ``label`` (None when it did not run)."""
    runs = res.get(label, {}).get(100)
    return _median(runs, key) if runs else None


def _explain(res: dict[str, dict[int, list[dict[str, Any]]]], profile_rows: list[list[Any]]) -> str:
    """Where the time goes at 100 creators, from the CPU per create of each set-up (module doc)."""
    def cpu(label: str, process: str) -> float:
        return _cpu(res[label][100], process) if label in res else 0.0
    plain, hooked = cpu("no webhook", "kube-apiserver"), cpu("webhook, labelled", "kube-apiserver")
    bare = cpu(BARE_SETUP, "kube-apiserver")
    call = cpu("webhook, unlabelled, late entry on", "kube-apiserver")
    policy = cpu(POLICY_SETUP, "kube-apiserver")
    idle = next((share for where, share in profile_rows if where.startswith("event loop")), None)
    shake = next((share for where, share in profile_rows if where == "TLS handshake"), None)
    rate = {label: _at100(res, label, "rate") for label in ("no webhook", "webhook, labelled", BARE_SETUP)}
    floor = cb.ratio(rate[BARE_SETUP] or 0.0, rate["no webhook"] or 0.0)
    own = cb.ratio(rate["webhook, labelled"] or 0.0, rate[BARE_SETUP] or 0.0)
    conns = {label: _at100(res, label, "webhook connections per create") for label in ("webhook, labelled", BARE_SETUP)}
    return (f"The floor is kube-apiserver's: a webhook that does nothing (the bare aiohttp handler, registered as "
            f"cogate's, answering the same patch) lets pods be created at {floor}x of the rate without a webhook, "
            f"and cogate's webhook reaches {own}x of that bare webhook. Per create kube-apiserver spent {plain} ms "
            f"of CPU without a webhook, {bare} ms calling the bare webhook and {hooked} ms calling cogate's (a call "
            f"answered without a patch, the late entry's for an unlabelled pod: {call} ms), while cogate's webhook "
            f"process spent {cpu('webhook, labelled', 'cogate-webhook')} ms and the bare one "
            f"{cpu(BARE_SETUP, 'bare-webhook')} ms"
            + (f"; cogate's was idle in {idle} % of py-spy's samples" if idle is not None else "")
            + (f" and in TLS handshakes in {shake} %" if shake is not None else "")
            + f". New TLS connections per create at 100 creators: {conns['webhook, labelled']} to cogate's webhook, "
            f"{conns[BARE_SETUP]} to the bare one: kube-apiserver keeps at most 25 idle connections per webhook host "
            "and opens a new one for each call beyond them (client-go transport/cache.go:45), over HTTP/1.1 (see "
            f"the notes). With the admission policies instead (chart admission.mode policy: no webhook call) "
            f"kube-apiserver spent {policy} ms per labelled create. On two cores shared by the whole control plane "
            "(and by other work: see the load average) creation is CPU-bound, so any admission mutation per pod "
            "lowers the rate by about its share of kube-apiserver's CPU: a JSON Patch, from a webhook or a "
            "MutatingAdmissionPolicy, re-encodes and decodes the pod (k8s.io/apiserver "
            "pkg/admission/plugin/policy/mutating/patch/json_patch.go) and marks it changed, which makes the "
            "admission chain run its mutating plugins once more.")


def _finding(res: dict[str, dict[int, list[dict[str, Any]]]]) -> str:
    """The floor in one paragraph: bare webhook against no webhook, cogate against bare, by concurrency."""
    def rate(label: str, c: int) -> float:
        return _median(res[label][c], "rate")
    parts = [f"{c} creators: bare {cb.ratio(rate(BARE_SETUP, c), rate('no webhook', c))}x of no webhook, cogate "
             f"{cb.ratio(rate('webhook, labelled', c), rate(BARE_SETUP, c))}x of bare" for c in CONCURRENCY]
    return ("The floor of calling any mutating webhook (set-up 'bare webhook, labelled': the bare aiohttp handler "
            "of the webhook benchmark, registered and answering as cogate's webhook, doing nothing else): "
            + "; ".join(parts) + ". The gap between the floor and no webhook is kube-apiserver's own work per call "
            "(the AdmissionReview encoded, sent over TLS, the answer decoded, the JSON Patch applied and the pod "
            "decoded again; and a patch that changes the pod makes kube-apiserver run its in-tree mutating plugins "
            "a second time: k8s.io/apiserver pkg/admission/plugin/webhook/mutating/dispatcher.go:192-195, "
            "pkg/admission/reinvocation.go:42-47); no webhook can remove it, and the admission policies avoid "
            "the call but not the patch and the second pass. The ratio of cogate to the floor is what cogate's own "
            "work costs; the rounds at 100 creators spread (created/s, lowest to highest): "
            + "; ".join(f"{label} {min(r['rate'] for r in res[label][100])}-{max(r['rate'] for r in res[label][100])}"
                        for label in ("no webhook", "webhook, labelled", BARE_SETUP)) + ".")


def _plot(res: dict[str, dict[int, list[dict[str, Any]]]], out_dir: Path) -> str:
    """Bars: created/s per set-up at each concurrency; returns the file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(SETUPS)
    for i, (label, _, _) in enumerate(SETUPS):
        xs = [j + i * width for j in range(len(CONCURRENCY))]
        ax.bar(xs, [_median(res[label][c], "rate") for c in CONCURRENCY], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(CONCURRENCY))], [f"{c} creators" for c in CONCURRENCY])
    ax.set_ylabel("pods created per second")
    ax.set_title("Pod creation through kube-apiserver")
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = "admission_rate.png"
    fig.savefig(out_dir / name, dpi=90)
    plt.close(fig)
    return name


def _result(res: dict[str, dict[int, list[dict[str, Any]]]], profile_rows: list[list[Any]], rounds: int,
            counts: dict[int, int], out_dir: Path) -> dict[str, Any]:
    base = {c: _median(res["no webhook"][c], "rate") for c in CONCURRENCY}
    rows = []
    for label, _, _ in SETUPS:
        for c in CONCURRENCY:
            runs = res[label][c]
            rate = _median(runs, "rate")
            rows.append([label, c, counts[c], rate, cb.ratio(rate, base[c]), _median(runs, "p50_ms"),
                         _median(runs, "p99_ms"), _median(runs, "webhook calls per create"),
                         _median(runs, "webhook connections per create"),
                         _cpu(runs, "kube-apiserver"), _cpu(runs, "etcd"),
                         _cpu(runs, "bare-webhook" if label == BARE_SETUP else "cogate-webhook"),
                         sum(sum(r["errors"].values()) for r in runs)])
    at100 = cb.ratio(_median(res["webhook, labelled"][100], "rate"), base[100])
    floor = cb.ratio(_median(res[BARE_SETUP][100], "rate"), base[100])
    own = cb.ratio(_median(res["webhook, labelled"][100], "rate"), _median(res[BARE_SETUP][100], "rate"))
    targets = [cb.target("pods created per second through the webhook (labelled pods, 100 creators)",
                         f">= {TARGET}x without the webhook", f"{at100}x (the floor, a bare webhook: {floor}x)",
                         at100 is not None and at100 >= TARGET, _explain(res, profile_rows))]
    targets.append(cb.target("the floor: pods created per second through a webhook that does nothing (bare aiohttp "
                             "handler, same registration and patch, labelled pods, 100 creators)",
                             "none (reported: kube-apiserver's cost of calling any mutating webhook)",
                             f"{floor}x without a webhook", None))
    targets.append(cb.target("cogate's webhook against the bare webhook (labelled pods, 100 creators)",
                             "none (reported: what cogate's own work costs)", f"{own}x", None))
    pol = cb.ratio(_median(res[POLICY_SETUP][100], "rate"), base[100])
    targets.append(cb.target("pods created per second with the admission policies (admission.mode policy, labelled "
                             "pods, 100 creators)", f">= {TARGET}x without cogate", f"{pol}x",
                             pol is not None and pol >= TARGET, _explain(res, profile_rows)))
    pre = cb.ratio(_median(res[PRE_GATED_SETUP][100], "rate"), base[100])
    targets.append(cb.target("pods created per second, pre-gated members (their template carries cogate's gate: no "
                             "webhook call; docs/semantics.md, Admission), 100 creators",
                             f">= {TARGET}x without the webhook", f"{pre}x", pre is not None and pre >= TARGET,
                             "The webhook's match conditions skip a member that already carries cogate's gate, a "
                             "nameable label and the default scheduler: kube-apiserver evaluates two CEL conditions "
                             "and calls no webhook (webhook calls per create in the table)."))
    unl = cb.ratio(_median(res["webhook, unlabelled, late entry off"][100], "rate"), base[100])
    targets.append(cb.target("unlabelled pods, late-label entry off (chart default), 100 creators",
                             "none (reported: the objectSelector keeps them from the webhook)", f"{unl}x", None))
    tables = [cb.table("Pods created per second (median of the rounds) and create latency",
                       ["set-up", "creators", "pods per run", "created/s", "ratio to no webhook", "p50 ms", "p99 ms",
                        "webhook calls per create", "new webhook connections per create",
                        "kube-apiserver CPU ms per create", "etcd CPU ms per create",
                        "webhook CPU ms per create (the one called)", "errors"], rows)]
    if profile_rows:
        tables.append(cb.table("Where the webhook's time goes at 100 creators (py-spy samples, labelled pods)",
                               ["where", "share of samples %"], profile_rows))
    return cb.result(
        NAME, TITLE,
        "Pods created through kube-apiserver by 1, 16 and 100 concurrent creators (closed loop, one keep-alive "
        "TLS connection each, a process of their own) on one local control plane, with cogate's webhook "
        "registered as cogate dev registers it, with it deleted, and without the late-label entry; every pod "
        "carries a gate of the benchmark's own, so no scheduler works on them, and cogate's controller is "
        "stopped: the create path alone. Webhook calls per create from its requests counter; CPU per create of "
        "kube-apiserver, etcd and the webhook from /proc; a py-spy profile of the webhook under 100 creators.",
        "the same pods created with no MutatingWebhookConfiguration, same control plane, same run "
        f"({rounds} rounds alternating the set-ups' order, median).",
        tables=tables, targets=targets,
        plots=[{"file": _plot(res, out_dir), "caption": "Pods created per second (median of the rounds)"}],
        notes=[_finding(res), "kube-apiserver's webhook client (read in the Go module cache at the version the local "
               "control plane builds): " + "; ".join(CLIENT_SOURCES) + ".",
               "Profile buckets: a sample is counted under the first bucket one of its frames names, innermost "
               "frame first (TLS, JSON, the admission rules, metrics, aiohttp, the event loop, other Python).",
               "raw figures: " + json.dumps(res)])


if __name__ == "__main__":
    cb.main(run)
