"""Tests of the webhook HTTP shell (cogate.webhook.server / main) against the real app.

Admission cases go through ``POST /mutate`` with the AdmissionReview JSON the API
server sends; the returned JSONPatch is applied with ``jsonpatch`` and the resulting
pod checked. TLS tests start the real server on 127.0.0.1 with certificates
generated here with ``cryptography``.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import ipaddress
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client.parser import text_string_to_metric_families

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.webhook import main as webhook_main
from cogate.webhook import server as webhook_server
from cogate.webhook.server import STATE, CertReloader, WebhookServer, make_app, reload_certificates

OURS = {"name": DEFAULT_GATE_NAME}
UID = "0df28fbd-5f5f-11e8-bc74-36e6bb280816"


def pod(group: str | None = "llm", gates: Any = "absent", node_name: str | None = None) -> dict[str, Any]:
    """A bare pod created by ``kubectl apply`` as the API server admits it (defaulted)."""
    labels = {"app": "llm-train"}
    if group is not None:
        labels[POD_GROUP_LABEL] = group
    obj: dict[str, Any] = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "llm-train-0",
            "namespace": "research",
            "creationTimestamp": None,
            "labels": labels,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"apiVersion":"v1","kind":"Pod"}\n'
            },
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-9zk4d",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.example/llm:1.2",
                    "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "priorityClassName": "training",
            "priority": 1000,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {},
    }
    if gates != "absent":
        obj["spec"]["schedulingGates"] = gates
    if node_name is not None:
        obj["spec"]["nodeName"] = node_name
    return obj


def review(obj: Any, operation: str = "CREATE", **request: Any) -> dict[str, Any]:
    body = {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "llm-train-0",
            "namespace": "research",
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
    body["request"].update(request)
    return body


def patched_pod(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    resp = answer["response"]
    if "patch" not in resp:
        return copy.deepcopy(obj)
    assert resp["patchType"] == "JSONPatch"
    return jsonpatch.apply_patch(obj, json.loads(base64.b64decode(resp["patch"])), in_place=False)


def with_gates(obj: dict[str, Any], gates: list[dict[str, str]]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["schedulingGates"] = gates
    return out


@pytest.fixture
async def client(aiohttp_client):
    return await aiohttp_client(make_app())


# ---------------------------------------------------------------- POST /mutate


CASES = [
    ("gate-added", pod(), "CREATE", [OURS], None),
    ("gate-appended", pod(gates=[{"name": "example.com/wait"}]), "CREATE", [{"name": "example.com/wait"}, OURS], None),
    ("already-gated", pod(gates=[{"name": "example.com/wait"}, OURS]), "CREATE", None, None),
    ("unlabelled", pod(group=None), "CREATE", None, None),
    ("node-name", pod(node_name="gpu-node-3"), "CREATE", None, "cannot be gang-gated"),
    ("empty-label", pod(group=""), "CREATE", None, "names no PodGroup"),
    ("update", pod(), "UPDATE", None, None),
]


@pytest.mark.parametrize("obj, operation, gates, warning", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_mutate(client, obj, operation, gates, warning):
    resp = await client.post("/mutate", json=review(obj, operation))
    assert resp.status == 200
    assert resp.content_type == "application/json"
    answer = await resp.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == UID
    assert answer["response"]["allowed"] is True
    result = patched_pod(obj, answer)
    if gates is None:
        assert "patch" not in answer["response"] and "patchType" not in answer["response"]
        assert result == obj
    else:
        assert result == with_gates(obj, gates)
    if warning is None:
        assert "warnings" not in answer["response"]
    else:
        assert any(warning in w for w in answer["response"]["warnings"])


async def test_mutate_other_kind_and_delete_untouched(client):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {POD_GROUP_LABEL: "llm"}}}
    resp = await client.post(
        "/mutate",
        json=review(
            cm,
            kind={"group": "", "version": "v1", "kind": "ConfigMap"},
            resource={"group": "", "version": "v1", "resource": "configmaps"},
        ),
    )
    assert resp.status == 200
    assert (await resp.json())["response"] == {"uid": UID, "allowed": True}
    resp = await client.post("/mutate", json=review(None, "DELETE", oldObject=pod()))
    assert resp.status == 200
    assert (await resp.json())["response"] == {"uid": UID, "allowed": True}


async def test_custom_gate_name(aiohttp_client):
    client = await aiohttp_client(make_app("example.com/gang"))
    obj = pod()
    answer = await (await client.post("/mutate", json=review(obj))).json()
    assert patched_pod(obj, answer)["spec"]["schedulingGates"] == [{"name": "example.com/gang"}]


async def test_large_but_legal_pod_is_accepted(client):
    obj = pod()
    obj["metadata"]["annotations"]["big"] = "x" * (1_500_000)  # etcd's default object limit is 1.5 MiB
    resp = await client.post("/mutate", json=review(obj))
    assert resp.status == 200
    assert patched_pod(obj, await resp.json()) == with_gates(obj, [OURS])


INVALID = [
    ("bad-json", b'{"apiVersion": "admission.k8s.io/v1", ', "not valid JSON"),
    ("not-utf8", b"\xff\xfe\x00{}", "not valid JSON"),
    ("empty-body", b"", "not valid JSON"),
    ("trailing-data", b'{"kind": "AdmissionReview"} {}', "not valid JSON"),
    ("nan", b'{"kind": NaN}', "not valid JSON"),
    ("lone-surrogate", b'{"kind": "\\ud800"}', "not valid JSON"),
    ("nested-past-the-decoder-limit", b'{"a":' * 1100 + b"1" + b"}" * 1100, "not valid JSON"),
    ("deeply-nested", b"[" * 200_000 + b"]" * 200_000, "body"),
    ("json-array", b"[]", "body"),
    ("v1beta1", json.dumps({**review(pod()), "apiVersion": "admission.k8s.io/v1beta1"}).encode(), "apiVersion"),
    ("wrong-kind", json.dumps({**review(pod()), "kind": "AdmissionRequest"}).encode(), "kind"),
    ("no-uid", json.dumps(review(pod(), uid=None)).encode(), "request.uid"),
    ("object-not-object", json.dumps(review("pod!")).encode(), "request.object"),
    ("labels-not-object", json.dumps(review({"metadata": {"labels": []}})).encode(), "request.object.metadata.labels"),
]


@pytest.mark.parametrize("body, field", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
async def test_invalid_review_is_400_naming_the_problem(client, body, field):
    resp = await client.post("/mutate", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert resp.content_type == "application/json"
    error = (await resp.json())["error"]
    assert field in error
    # The server keeps serving after every bad request.
    assert (await client.get("/healthz")).status == 200


async def test_body_too_large_is_400(aiohttp_client):
    client = await aiohttp_client(make_app(max_body_bytes=4096))
    obj = pod()
    obj["metadata"]["annotations"]["big"] = "x" * 8192
    resp = await client.post("/mutate", json=review(obj))
    assert resp.status == 400
    assert "larger than 4096 bytes" in (await resp.json())["error"]
    small = await client.post("/mutate", json=review(pod()))
    assert small.status == 200


async def test_internal_error_denies_with_uid_never_500(aiohttp_client, monkeypatch, caplog):
    def boom(review, gate_name):
        raise RuntimeError("bug")

    monkeypatch.setattr(webhook_server, "evaluate", boom)
    client = await aiohttp_client(make_app())
    with caplog.at_level(logging.ERROR, logger="cogate.webhook"):
        resp = await client.post("/mutate", json=review(pod()))
    assert resp.status == 200
    answer = (await resp.json())["response"]
    assert answer["uid"] == UID and answer["allowed"] is False
    assert answer["status"]["reason"] == "InternalError"
    assert any(r.levelno == logging.ERROR and r.exc_info for r in caplog.records)
    # Without a usable uid there is no AdmissionReview to answer: 400.
    resp = await client.post("/mutate", json={"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
    assert resp.status == 400


async def test_unexpected_failure_outside_the_decision_is_400_not_500(aiohttp_client, monkeypatch):
    async def broken(request, *config):
        raise KeyError("logging bug")

    monkeypatch.setattr(webhook_server, "_mutate_inner", broken)
    client = await aiohttp_client(make_app())
    resp = await client.post("/mutate", json=review(pod()))
    assert resp.status == 400
    assert "KeyError" in (await resp.json())["error"]
    samples = _samples(await (await client.get("/metrics")).text())
    assert samples[("cogate_webhook_requests_total", (("outcome", "error"),))] == 1


async def test_wrong_method_and_path_are_not_500(client):
    assert (await client.get("/mutate")).status == 405
    assert (await client.post("/validate", json={})).status == 404


# ---------------------------------------------------------------- probes, metrics, logs


async def test_healthz_and_readyz_draining(client):
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 200
    client.server.app[STATE].draining = True
    assert (await client.get("/readyz")).status == 503
    assert (await client.get("/healthz")).status == 200


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_metrics_count_requests_by_outcome_and_latency(client):
    await client.post("/mutate", json=review(pod()))
    await client.post("/mutate", json=review(pod()))
    await client.post("/mutate", json=review(pod(group=None)))
    await client.post("/mutate", data=b"nope")
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    samples = _samples(await resp.text())
    total = "cogate_webhook_requests_total"
    assert samples[(total, (("outcome", "gated"),))] == 2
    assert samples[(total, (("outcome", "ignored"),))] == 1
    assert samples[(total, (("outcome", "invalid"),))] == 1
    assert samples[(total, (("outcome", "error"),))] == 0
    assert samples[("cogate_webhook_request_duration_seconds_count", ())] == 4
    assert samples[("cogate_webhook_request_duration_seconds_bucket", (("le", "+Inf"),))] == 4


async def test_connections_are_counted_once_each_at_their_first_mutate(aiohttp_client):
    """Keep-alive requests on one connection count one connection; a new connection counts again;
    probes and metrics scrapes do not count."""
    import aiohttp

    client = await aiohttp_client(make_app())
    url = client.make_url("/mutate")

    async def connections() -> float:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as scrape:
            async with scrape.get(client.make_url("/metrics")) as resp:
                return _samples(await resp.text())[("cogate_webhook_connections_total", ())]

    assert await connections() == 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as kept:
        for _ in range(3):
            async with kept.post(url, json=review(pod())) as resp:
                assert resp.status == 200
        await kept.get(client.make_url("/healthz"))
    assert await connections() == 1
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as fresh:
        for _ in range(2):
            async with fresh.post(url, json=review(pod())) as resp:
                assert resp.status == 200
    assert await connections() == 3


async def test_adopted_scheduler_name_is_rewritten_warned_and_counted(aiohttp_client):
    client = await aiohttp_client(make_app(adopted=frozenset({"scheduler-plugins-scheduler"})))
    obj = pod()
    obj["spec"]["schedulerName"] = "scheduler-plugins-scheduler"
    answer = await (await client.post("/mutate", json=review(obj))).json()
    expected = with_gates(obj, [OURS])
    expected["spec"]["schedulerName"] = "default-scheduler"
    assert patched_pod(obj, answer) == expected
    assert answer["response"]["warnings"] == [
        "schedulerName 'scheduler-plugins-scheduler' -> 'default-scheduler': adopted by cogate"]
    await client.post("/mutate", json=review(pod()))  # default-scheduler: gated, not adopted
    samples = _samples(await (await client.get("/metrics")).text())
    assert samples[("cogate_webhook_scheduler_names_adopted_total",
                    (("scheduler_name", "scheduler-plugins-scheduler"),))] == 1
    assert samples[("cogate_webhook_requests_total", (("outcome", "gated"),))] == 2


async def test_adoption_counter_is_exported_at_zero(client, aiohttp_client):
    adopting = await aiohttp_client(make_app(adopted=frozenset({"a-sched", "b-sched"})))
    samples = _samples(await (await adopting.get("/metrics")).text())
    name = "cogate_webhook_scheduler_names_adopted_total"
    assert samples[(name, (("scheduler_name", "a-sched"),))] == 0
    assert samples[(name, (("scheduler_name", "b-sched"),))] == 0
    assert not [k for k in _samples(await (await client.get("/metrics")).text()) if k[0] == name]


@pytest.mark.parametrize("adopted, planned", [
    ({"default-scheduler"}, frozenset({"default-scheduler"})),
    ({"gpu"}, frozenset({"default-scheduler", "gpu"})),
])
def test_make_app_refuses_contradictory_adoption(adopted, planned):
    with pytest.raises(ValueError, match="--adopt-scheduler-name"):
        make_app(scheduler_names=planned, adopted=frozenset(adopted))


async def test_request_logging(client, caplog):
    with caplog.at_level(logging.DEBUG, logger="cogate.webhook"):
        await client.post("/mutate", json=review(pod()))
        await client.post("/mutate", json=review(pod(), uid=""))
    admissions = [r for r in caplog.records if getattr(r, "event", None) == "admission"]
    assert len(admissions) == 1
    rec = admissions[0]
    assert rec.levelno == logging.DEBUG
    assert (rec.uid, rec.namespace, rec.object_name, rec.outcome, rec.group) == (UID, "research", "llm-train-0", "gated", "llm")
    invalid = [r for r in caplog.records if getattr(r, "event", None) == "invalid_review"]
    assert len(invalid) == 1 and invalid[0].levelno == logging.WARNING and "request.uid" in invalid[0].reason


def test_json_formatter_emits_one_json_line_with_extras():
    record = logging.LogRecord("cogate.webhook", logging.WARNING, __file__, 1, "bad %s", ("x",), None)
    record.uid = "u-1"
    line = webhook_main.JsonFormatter().format(record)
    assert "\n" not in line
    data = json.loads(line)
    assert data["msg"] == "bad x" and data["level"] == "warning" and data["uid"] == "u-1"


# ---------------------------------------------------------------- TLS


def make_cert(common_name: str) -> tuple[bytes, bytes]:
    """A self-signed EC P-256 serving certificate for 127.0.0.1/localhost: (cert PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` like a Secret volume update does: new inode, atomic rename."""
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def client_context(cert_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=cert_pem.decode())
    return ctx


def der(cert_pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)


async def peer_cert(port: int, cert_pem: bytes) -> bytes:
    """DER certificate the server presents on a *new* connection (verified against cert_pem)."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(cert_pem))
    try:
        return writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
def cert_files(tmp_path):
    cert_a, key_a = make_cert("cogate-webhook-a")
    cert_path, key_path = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_path.write_bytes(cert_a)
    key_path.write_bytes(key_a)
    return cert_path, key_path, cert_a, key_a


async def test_https_end_to_end(cert_files):
    cert_path, key_path, cert_a, _ = cert_files
    server = WebhookServer(make_app(), "127.0.0.1", 0, tls=CertReloader(str(cert_path), str(key_path)))
    await server.start()
    try:
        base = f"https://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as session:
            obj = pod()
            async with session.post(f"{base}/mutate", json=review(obj), ssl=client_context(cert_a)) as resp:
                assert resp.status == 200
                assert patched_pod(obj, await resp.json()) == with_gates(obj, [OURS])
            async with session.get(f"{base}/readyz", ssl=client_context(cert_a)) as resp:
                assert resp.status == 200
            # A client that does not trust the certificate fails the handshake.
            other_cert, _ = make_cert("someone-else")
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(f"{base}/healthz", ssl=client_context(other_cert))
    finally:
        await server.stop()


async def test_certificate_reload_serves_new_cert_to_new_connections(cert_files):
    cert_path, key_path, cert_a, key_a = cert_files
    reloader = CertReloader(str(cert_path), str(key_path), interval=3600)
    server = WebhookServer(make_app(), "127.0.0.1", 0, tls=reloader)
    await server.start()
    try:
        assert await peer_cert(server.port, cert_a) == der(cert_a)
        assert reloader.check() is False  # unchanged files: no reload

        cert_b, key_b = make_cert("cogate-webhook-b")
        # Half-way through a rotation (new cert, old key) the pair does not load:
        # the old certificate stays in service.
        write_atomic(cert_path, cert_b)
        assert reloader.check() is False
        assert await peer_cert(server.port, cert_a) == der(cert_a)

        write_atomic(key_path, key_b)
        assert reloader.check() is True
        assert reloader.reloads == 1
        assert await peer_cert(server.port, cert_b) == der(cert_b)
        with pytest.raises(ssl.SSLCertVerificationError):
            await peer_cert(server.port, cert_a)
    finally:
        await server.stop()


async def test_reload_loop_picks_up_changed_files(cert_files):
    cert_path, key_path, cert_a, _ = cert_files
    reloader = CertReloader(str(cert_path), str(key_path), interval=0.05)
    server = WebhookServer(make_app(), "127.0.0.1", 0, tls=reloader)
    await server.start()
    try:
        cert_b, key_b = make_cert("cogate-webhook-b")
        write_atomic(key_path, key_b)
        write_atomic(cert_path, cert_b)
        await asyncio.wait_for(reloader.reloaded.wait(), timeout=30)
        assert await peer_cert(server.port, cert_b) == der(cert_b)
    finally:
        await server.stop()


async def test_app_owns_the_certificate_reload_task(cert_files):
    """The reload loop lives exactly as long as the app: started on startup, cancelled on cleanup."""
    cert_path, key_path, _, _ = cert_files
    app = make_app()
    reload_certificates(app, CertReloader(str(cert_path), str(key_path), interval=3600))

    def reload_tasks() -> list[asyncio.Task]:
        return [t for t in asyncio.all_tasks() if t.get_name() == "cogate-webhook-tls-reload"]

    assert reload_tasks() == []
    runner = web.AppRunner(app)
    await runner.setup()
    (task,) = reload_tasks()
    assert not task.done()
    await runner.cleanup()
    assert task.cancelled() and reload_tasks() == []


def test_cert_reloader_rejects_missing_files_and_bad_interval(tmp_path, cert_files):
    cert_path, key_path, _, _ = cert_files
    with pytest.raises(OSError):
        CertReloader(str(tmp_path / "missing.crt"), str(key_path))
    with pytest.raises(ValueError, match="interval"):
        CertReloader(str(cert_path), str(key_path), interval=0)


# ---------------------------------------------------------------- shutdown and main


async def test_stop_drains_in_flight_requests():
    app = make_app()
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(request):
        entered.set()
        await release.wait()
        return aiohttp.web.Response(text="done")

    app.router.add_get("/slow", slow)
    server = WebhookServer(app, "127.0.0.1", 0, tls=None, shutdown_timeout=30)
    await server.start()
    async with aiohttp.ClientSession() as session:
        in_flight = asyncio.create_task(session.get(f"http://127.0.0.1:{server.port}/slow"))
        await entered.wait()
        stopping = asyncio.create_task(server.stop())
        await asyncio.sleep(0)
        assert app[STATE].draining is True
        assert not stopping.done()
        release.set()
        resp = await in_flight
        assert resp.status == 200 and await resp.text() == "done"
        await stopping


async def test_metrics_port_serves_probes_without_mutate():
    server = WebhookServer(make_app(), "127.0.0.1", 0, tls=None, metrics_port=0)
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.probe_port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/metrics") as resp:
                assert resp.status == 200 and "cogate_webhook_requests_total" in await resp.text()
            async with session.get(f"{base}/readyz") as resp:
                assert resp.status == 200
            async with session.post(f"{base}/mutate", json=review(pod())) as resp:
                assert resp.status == 404
    finally:
        await server.stop()


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "--tls-cert-file and --tls-key-file are required"),
        (["--tls-cert-file", "c.pem"], "--tls-cert-file and --tls-key-file are required"),
        (["--insecure-http", "--gate-name", "Bad Gate"], "gate name"),
        (["--insecure-http", "--port", "70000"], "port must be"),
        (["--insecure-http", "--tls-reload-interval", "0"], "must be > 0"),
        (["--insecure-http", "--adopt-scheduler-name", "default-scheduler"], "rewritten to"),
        (["--insecure-http", "--adopt-scheduler-name", "sps", "--scheduler-name", "sps"],
         "--adopt-scheduler-name 'sps' is also a --scheduler-name"),
        (["--insecure-http", "--adopt-scheduler-name", ""], "non-empty"),
    ],
)
def test_main_rejects_bad_flags(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        webhook_main.main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_flag_defaults():
    args = webhook_main.build_parser().parse_args(["--insecure-http"])
    assert (args.host, args.port, args.gate_name, args.metrics_port) == ("", 9443, DEFAULT_GATE_NAME, None)
    assert args.adopt_scheduler_names == [] and args.scheduler_names == []


def test_scheduler_flags_reach_the_app(monkeypatch):
    """``--scheduler-name`` and ``--adopt-scheduler-name`` (repeatable) reach make_app."""
    seen = {}
    real = webhook_server.make_app

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(webhook_server, "make_app", spy)
    argv = ["--insecure-http", "--host", "127.0.0.1", "--port", "0", "--scheduler-name", "gpu",
            "--adopt-scheduler-name", "scheduler-plugins-scheduler", "--adopt-scheduler-name", "volcano"]
    stop = asyncio.Event()
    stop.set()
    assert asyncio.run(webhook_main._serve(webhook_main.build_parser().parse_args(argv), stop)) == 0
    assert seen["scheduler_names"] == {"default-scheduler", "gpu"}
    assert seen["adopted"] == {"scheduler-plugins-scheduler", "volcano"}


def test_main_exits_1_on_unloadable_certificate(tmp_path, monkeypatch):
    monkeypatch.setattr(webhook_main, "_configure_logging", lambda level, fmt: None)
    missing = str(tmp_path / "nope.pem")
    assert webhook_main.main(["--tls-cert-file", missing, "--tls-key-file", missing, "--port", "0"]) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_process_serves_https_and_exits_0_on_sigterm(cert_files):
    """The real process: serves /readyz over TLS, drains and exits 0 on SIGTERM."""
    cert_path, key_path, cert_a, _ = cert_files
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "cogate.webhook.main",
            "--host", "127.0.0.1", "--port", str(port),
            "--tls-cert-file", str(cert_path), "--tls-key-file", str(key_path),
            "--log-level", "debug", "--log-format", "json",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        ctx = client_context(cert_a)
        for _ in range(600):  # wait up to ~60 s for the listener (slow CI)
            if proc.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as raw:
                    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                        tls.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        reply = tls.recv(100)
                        assert reply.startswith(b"HTTP/1.1 200")
                        break
            except (ConnectionRefusedError, ConnectionResetError):
                time.sleep(0.1)
        else:
            pytest.fail("webhook process did not start listening")
        assert proc.poll() is None, proc.stderr.read()
        proc.terminate()  # SIGTERM
        assert proc.wait(timeout=30) == 0
        lines = [json.loads(line) for line in proc.stderr.read().splitlines() if line.strip()]
        events = [line.get("event") for line in lines]
        assert "listening" in events and "draining" in events and "drained" in events
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_shutdown_delay_keeps_serving_with_connection_close_then_closes(cert_files):
    """On stop, a replica keeps answering for shutdown_delay seconds (readyz 503, every response
    closing its connection) while it leaves the Service's endpoints; then the listener closes.
    The drain ends when the test says so (``drain`` replaced), so no wall-clock window decides."""
    cert_path, key_path, cert_a, _ = cert_files
    server = WebhookServer(make_app(), "127.0.0.1", 0, tls=CertReloader(str(cert_path), str(key_path)),
                           shutdown_delay=1.0)
    draining, drained = asyncio.Event(), asyncio.Event()

    async def drain():
        draining.set()
        await drained.wait()

    server.drain = drain
    await server.start()
    base = f"https://127.0.0.1:{server.port}"
    stopping = asyncio.create_task(server.stop())
    await draining.wait()
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/mutate", json=review(pod()), ssl=client_context(cert_a)) as resp:
            assert resp.status == 200 and resp.headers.get("Connection", "").lower() == "close"
        async with session.get(f"{base}/readyz", ssl=client_context(cert_a)) as resp:
            assert resp.status == 503
        assert not stopping.done()  # still serving: the drain has not ended
        drained.set()
        await stopping
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.get(f"{base}/healthz", ssl=client_context(cert_a))


def test_reload_writes_nothing_to_disk(cert_files, monkeypatch):
    """In the container the root file system is read-only and /certs is mounted read-only:
    a reload must not need a writable temporary directory (it did, and every rotated
    certificate was refused with EROFS while the old one expired)."""
    import tempfile

    cert_path, key_path, _, _ = cert_files
    reloader = CertReloader(str(cert_path), str(key_path), interval=3600)

    def no_disk(*a, **k):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_disk)
    monkeypatch.setattr(tempfile, "mkstemp", no_disk)
    cert_b, key_b = make_cert("cogate-webhook-b")
    write_atomic(key_path, key_b)
    write_atomic(cert_path, cert_b)
    assert reloader.check() is True and reloader.reloads == 1


def _expiry(app: web.Application) -> list[float]:
    text = webhook_server.generate_latest(app[webhook_server.METRICS].registry).decode()
    return [s.value for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name == "cogate_webhook_certificate_expiry_timestamp_seconds"]


def test_certificate_expiry_gauge_follows_the_certificate_in_use(cert_files):
    cert_path, key_path, cert_a, _ = cert_files
    app = make_app()
    assert _expiry(app) == []  # no TLS (yet): no sample, so no expiry alert
    reloader = CertReloader(str(cert_path), str(key_path), interval=3600)
    reload_certificates(app, reloader)
    want_a = x509.load_pem_x509_certificate(cert_a).not_valid_after_utc.timestamp()
    assert _expiry(app) == [want_a]
    cert_b, key_b = make_cert("cogate-webhook-b")
    write_atomic(key_path, key_b)
    write_atomic(cert_path, cert_b)
    assert reloader.check() is True
    want_b = x509.load_pem_x509_certificate(cert_b).not_valid_after_utc.timestamp()
    assert _expiry(app) == [want_b] and want_b >= want_a


def test_webhook_exports_build_info_and_process_metrics():
    text = webhook_server.generate_latest(make_app()[webhook_server.METRICS].registry).decode()
    assert "cogate_build_info{" in text and "process_open_fds" in text and "process_cpu_seconds_total" in text
