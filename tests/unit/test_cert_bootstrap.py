"""certs.bootstrap: rotation decision, Secret data, caBundle patch, Secret create/update races."""

from __future__ import annotations

import base64
import time
from types import SimpleNamespace

import jsonpatch
import pytest
from cryptography import x509

from kubernetes.client.exceptions import ApiException as _ApiException

from cogate.certs import bootstrap as b
from cogate.certs import pki

NAMES = b.service_dns_names("cogate-webhook", "cogate-system")
DAY = 86400.0


def sans(pem: bytes) -> list[str]:
    cert = pki.load_cert_pem(pem)
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


@pytest.fixture(scope="module")
def good() -> dict[str, bytes]:
    return b.build_secret_data(NAMES, time.time())


def test_service_dns_names():
    assert NAMES == ["cogate-webhook", "cogate-webhook.cogate-system", "cogate-webhook.cogate-system.svc",
                     "cogate-webhook.cogate-system.svc.cluster.local"]
    assert b.service_dns_names("s", "n", "") == ["s", "s.n", "s.n.svc"]
    with pytest.raises(ValueError):
        b.service_dns_names("", "n")


def test_built_data_is_a_valid_chain_for_the_service(good):
    assert set(good) == set(b.SECRET_KEYS)
    assert sans(good["tls.crt"]) == NAMES
    pki.verify_issued_by(pki.load_cert_pem(good["tls.crt"]), pki.load_cert_pem(good["ca.crt"]))
    assert b.rotation_reason(good, NAMES, time.time()) is None


def test_rotation_reasons(good):
    now = time.time()
    assert b.rotation_reason(None, NAMES, now) == "no secret"
    assert "missing keys" in b.rotation_reason({k: v for k, v in good.items() if k != "tls.key"}, NAMES, now)
    assert "unparsable" in b.rotation_reason({**good, "tls.crt": b"garbage"}, NAMES, now)
    assert "lacks DNS names" in b.rotation_reason(good, NAMES + ["other.svc"], now)
    other = b.build_secret_data(NAMES, now)
    assert "does not match" in b.rotation_reason({**good, "tls.key": other["tls.key"]}, NAMES, now)
    assert "not valid under" in b.rotation_reason({**good, "tls.crt": other["tls.crt"], "tls.key": other["tls.key"]},
                                                  NAMES, now)


def test_rotates_within_30_days_of_expiry(good):
    leaf_end = pki.not_after(pki.load_cert_pem(good["tls.crt"]))
    assert b.rotation_reason(good, NAMES, leaf_end - 31 * DAY) is None
    reason = b.rotation_reason(good, NAMES, leaf_end - 29 * DAY)
    assert reason is not None and "tls.crt expires in 29.0 days" in reason
    assert b.rotation_reason(good, NAMES, leaf_end - 5 * DAY, rotate_before=1 * DAY) is None


def test_rotation_keeps_a_valid_ca(good):
    fresh = b.build_secret_data(NAMES, time.time(), previous=good)
    assert fresh["ca.crt"] == good["ca.crt"] and fresh["ca.key"] == good["ca.key"]
    assert fresh["tls.crt"] != good["tls.crt"]
    assert b.rotation_reason(fresh, NAMES, time.time()) is None


def test_rotation_of_an_expiring_ca_bundles_the_old_one(good):
    ca_end = pki.not_after(pki.load_cert_pem(good["ca.crt"]))
    # pretend we are 10 days before the CA expires (the CA is still valid, so it stays in the bundle)
    fresh = b.build_secret_data(NAMES, ca_end - 10 * DAY, previous=good)
    cas = pki.load_certs_pem(fresh["ca.crt"])
    assert len(cas) == 2
    assert pki.cert_to_pem(cas[1]) == good["ca.crt"]
    assert fresh["ca.key"] != good["ca.key"]
    pki.verify_issued_by(pki.load_cert_pem(fresh["tls.crt"]), cas[0])


def test_garbage_previous_gives_a_new_ca():
    fresh = b.build_secret_data(NAMES, time.time(), previous={"ca.crt": b"x", "ca.key": b"y"})
    assert len(pki.load_certs_pem(fresh["ca.crt"])) == 1
    with pytest.raises(ValueError, match="dns_names"):
        b.build_secret_data([], time.time())


def test_secret_body_and_decode_round_trip(good):
    body = b.secret_body("s", "ns", good, resource_version="7")
    assert body["metadata"]["resourceVersion"] == "7" and body["type"] == "Opaque"
    assert b.decode_secret_data(body["data"]) == good
    assert "resourceVersion" not in b.secret_body("s", "ns", good)["metadata"]
    assert b.decode_secret_data({"a": "!!!", "b": base64.b64encode(b"x").decode()}) == {"b": b"x"}
    assert b.decode_secret_data(None) is None


def _config(bundles: list[str | None]) -> dict:
    hooks = []
    for i, bundle in enumerate(bundles):
        cc = {"service": {"name": "cogate-webhook", "namespace": "cogate-system"}}
        if bundle is not None:
            cc["caBundle"] = bundle
        hooks.append({"name": f"hook-{i}.example.com", "clientConfig": cc})
    return {"metadata": {"name": "cogate"}, "webhooks": hooks}


def test_ca_bundle_patch_sets_only_our_entries_and_applies():
    ca = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    want = base64.b64encode(ca).decode()
    config = _config([None, "b2xk", want])
    ops = b.ca_bundle_patch(config, ca, ["hook-0.example.com", "hook-1.example.com", "hook-2.example.com"])
    patched = jsonpatch.apply_patch(config, ops)
    assert [h["clientConfig"]["caBundle"] for h in patched["webhooks"]] == [want, want, want]
    assert len(ops) == 4  # entry 2 already right
    # only named entries
    ops = b.ca_bundle_patch(config, ca, ["hook-1.example.com"])
    assert [o["path"] for o in ops] == ["/webhooks/1/name", "/webhooks/1/clientConfig/caBundle"]
    # None = every entry; nothing to do once applied
    assert b.ca_bundle_patch(jsonpatch.apply_patch(config, b.ca_bundle_patch(config, ca)), ca) == []
    assert b.ca_bundle_patch({"webhooks": None}, ca) == []


def test_ca_bundle_patch_test_op_guards_a_reordered_list():
    ca = b"pem"
    config = _config([None, None])
    ops = b.ca_bundle_patch(config, ca, ["hook-1.example.com"])
    reordered = {"webhooks": list(reversed(config["webhooks"]))}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(reordered, ops)


# ------------------------------------------------------------------ Secret races with a fake API
def ApiException(status: int) -> Exception:  # noqa: N802 - the client's exception, as the API raises it
    return _ApiException(status=status, reason="fake")


class FakeCore:
    """Secret store with resourceVersion checks; ``before_write`` lets a 'rival replica' write first."""

    def __init__(self, initial: dict | None = None):
        self.secret = initial
        self.rv = 1
        self.writes = 0
        self.before_write = None

    def read_namespaced_secret(self, name, namespace):
        if self.secret is None:
            raise ApiException(404)
        return SimpleNamespace(data=self.secret["data"], metadata=SimpleNamespace(resource_version=str(self.rv)))

    def _rival(self):
        if self.before_write:
            hook, self.before_write = self.before_write, None
            hook(self)

    def create_namespaced_secret(self, namespace, body):
        self._rival()
        if self.secret is not None:
            raise ApiException(409)
        self.secret, self.rv, self.writes = body, self.rv + 1, self.writes + 1

    def replace_namespaced_secret(self, name, namespace, body):
        self._rival()
        if body["metadata"]["resourceVersion"] != str(self.rv):
            raise ApiException(409)
        self.secret, self.rv, self.writes = body, self.rv + 1, self.writes + 1


def test_ensure_secret_creates_when_absent():
    core = FakeCore()
    data = b.ensure_secret(core, "ns", "s", NAMES)
    assert core.writes == 1
    assert b.decode_secret_data(core.secret["data"]) == data


def test_ensure_secret_keeps_a_good_secret(good):
    core = FakeCore(b.secret_body("s", "ns", good))
    assert b.ensure_secret(core, "ns", "s", NAMES) == good
    assert core.writes == 0


def test_ensure_secret_loses_create_race_and_uses_the_winner(good):
    core = FakeCore()

    def rival(c):
        c.secret, c.rv = b.secret_body("s", "ns", good), c.rv + 1

    core.before_write = rival
    assert b.ensure_secret(core, "ns", "s", NAMES) == good
    assert core.writes == 0


def test_ensure_secret_rotates_with_resource_version_and_retries_on_conflict(good):
    leaf_end = pki.not_after(pki.load_cert_pem(good["tls.crt"]))
    core = FakeCore(b.secret_body("s", "ns", good))
    core.before_write = lambda c: setattr(c, "rv", c.rv + 1)  # someone touched it: 409 once
    data = b.ensure_secret(core, "ns", "s", NAMES, now=leaf_end - DAY)
    assert core.writes == 1
    assert data["tls.crt"] != good["tls.crt"] and data["ca.crt"] == good["ca.crt"]


def test_ensure_secret_gives_up_after_repeated_races():
    core = FakeCore()
    core.create_namespaced_secret = lambda ns, body: (_ for _ in ()).throw(ApiException(409))
    with pytest.raises(RuntimeError, match="lost 3 write races"):
        b.ensure_secret(core, "ns", "s", NAMES, attempts=3)


def test_ensure_secret_propagates_other_errors():
    core = FakeCore()
    core.read_namespaced_secret = lambda name, ns: (_ for _ in ()).throw(ApiException(403))
    with pytest.raises(_ApiException) as err:
        b.ensure_secret(core, "ns", "s", NAMES)
    assert err.value.status == 403


def test_write_cert_files_only_on_change(tmp_path, good):
    assert {p.name for p in b.write_cert_files(tmp_path, good)} == {"tls.crt", "tls.key", "ca.crt"}
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0
    assert b.write_cert_files(tmp_path, good) == []
    other = b.build_secret_data(NAMES, time.time(), previous=good)
    assert {p.name for p in b.write_cert_files(tmp_path, other)} == {"tls.crt", "tls.key"}


def test_generate_cli(tmp_path, capsys):
    assert b.main(["generate", "--out", str(tmp_path), "--dns", "localhost", "--ip", "127.0.0.1"]) == 0
    data = {k: (tmp_path / k).read_bytes() for k in b.SECRET_KEYS}
    assert b.rotation_reason(data, ["localhost"], time.time()) is None
    assert b.main(["generate", "--out", str(tmp_path / "x"), "--dns", "localhost", "--ip", "not-an-ip"]) == 2


def test_serving_certificate_carries_ip_sans():
    import ipaddress

    from cryptography import x509

    data = b.build_secret_data(["localhost"], 1_800_000_000.0, ip_addresses=["127.0.0.1"])
    leaf = pki.load_cert_pem(data[b.TLS_CERT])
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]


def test_validity_is_configurable_in_fractions_of_a_day():
    now = time.time()
    data = b.build_secret_data(NAMES, now, ca_days=60 / DAY, leaf_days=30 / DAY)
    ca, leaf = pki.load_certs_pem(data["ca.crt"])[0], pki.load_cert_pem(data["tls.crt"])
    assert pki.not_after(ca) - now == pytest.approx(60, abs=2)
    assert pki.not_after(leaf) - now == pytest.approx(30, abs=2)
    # 20 s before the CA expires it is rolled over; the old one stays in the bundle while valid
    later = now + 45
    assert b.rotation_reason(data, NAMES, later, rotate_before=20) is not None
    rolled = b.build_secret_data(NAMES, later, previous=data, rotate_before=20, ca_days=60 / DAY, leaf_days=30 / DAY)
    cas = pki.load_certs_pem(rolled["ca.crt"])
    assert len(cas) == 2 and cas[1].fingerprint(pki.hashes.SHA256()) == ca.fingerprint(pki.hashes.SHA256())


@pytest.mark.parametrize("flags", [
    ["--rotate-before-days", "400"],                                 # >= certificate validity (365)
    ["--cert-validity-days", "4000"],                                # > CA validity (3650)
    ["--cert-validity-days", "0"],
    ["--ca-validity-days", "nan"],
])
def test_bootstrap_refuses_validities_that_rotate_on_every_pass(flags, capsys):
    with pytest.raises(SystemExit) as exc:
        b.main(["bootstrap", "--namespace", "ns", *flags])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "validity-days" in err or "rotate-before-days" in err, err


def test_bootstrap_sets_ca_bundle_before_the_files_change(tmp_path, good):
    """After a CA rollover the API server must trust the new CA before a replica serves a
    certificate it signed: the caBundle patch comes before the files are written."""
    order: list[str] = []

    class Admission:
        def read_mutating_webhook_configuration(self, name):
            order.append("read config")
            return {"webhooks": [{"name": "w", "clientConfig": {}}]}

        def patch_mutating_webhook_configuration(self, name, ops, **kw):
            order.append("patch caBundle")
            assert not (tmp_path / "tls.crt").exists(), "files written before caBundle"

    args = b.build_parser().parse_args(["bootstrap", "--namespace", "ns", "--cert-dir", str(tmp_path),
                                        "--webhook-config-name", "cogate"])
    b.bootstrap_once(args, FakeCore(), Admission())
    assert order == ["read config", "patch caBundle"] and (tmp_path / "tls.crt").is_file()


def test_lowering_the_validity_rotates_the_leaf_at_the_next_check(good):
    """A serving certificate issued under a longer validity is replaced once the configured one
    is lower, under the same CA: replicas of a rollout that disagree about the validity only
    swap serving certificates, never CAs."""
    now = time.time()
    assert b.rotation_reason(good, NAMES, now) is None
    assert "longer than the configured" in b.rotation_reason(good, NAMES, now, leaf_days=60)
    short = b.build_secret_data(NAMES, now, previous=good, leaf_days=60, ca_days=100)
    assert short["ca.crt"] == good["ca.crt"]
    assert b.rotation_reason(short, NAMES, now, leaf_days=60, ca_days=100) is None
    back = b.build_secret_data(NAMES, now, previous=short)  # the other replicas' settings
    assert back["ca.crt"] == good["ca.crt"]


def test_removing_ca_key_rolls_the_ca_over_keeping_the_old_one():
    """An operator rolls the CA over at once by removing ca.key from the Secret."""
    now = time.time()
    data = b.build_secret_data(NAMES, now)
    without_key = {k: v for k, v in data.items() if k != "ca.key"}
    assert "missing keys" in b.rotation_reason(without_key, NAMES, now)
    rolled = b.build_secret_data(NAMES, now, previous=without_key)
    cas = pki.load_certs_pem(rolled["ca.crt"])
    assert len(cas) == 2 and pki.cert_to_pem(cas[1]) == pki.cert_to_pem(pki.load_certs_pem(data["ca.crt"])[0])
    assert b.rotation_reason(rolled, NAMES, now) is None


@pytest.mark.parametrize("name, why", [
    ("cogate_webhook.ns.svc", "the character '_'"),
    ("cogate-.ns.svc", "starting or ending with a hyphen"),
    ("cogate..svc", "an empty label"),
    ("cogate.svc.", "an empty label"),
    ("a" * 64 + ".svc", "longer than 63"),
    ("*.*.svc", "the character '*'"),
    ("web hook.svc", "the character ' '"),
])
def test_generate_refuses_an_invalid_dns_name_naming_it(tmp_path, capsys, name, why):
    with pytest.raises(SystemExit) as exc:
        b.main(["generate", "--out", str(tmp_path), "--dns", "localhost", "--dns", name])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{name!r} is not a valid DNS name (RFC 1123)" in err and why in err, err
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("name", ["localhost", "cogate-webhook.cogate-system.svc", "*.example.com", "A1.b-2.C3",
                                  "x" * 63 + ".y"])
def test_valid_dns_names_pass(name):
    from cogate.certs import pki

    assert pki.check_dns_name(name) == name


@pytest.mark.parametrize("env", [{}, {"KUBECONFIG": "/nonexistent/kubeconfig"}], ids=["nothing", "missing-file"])
def test_bootstrap_without_a_client_configuration_is_one_line_and_exit_1(monkeypatch, capsys, env, tmp_path):
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert b.main(["bootstrap", "--namespace", "ns", "--cert-dir", str(tmp_path)]) == 1
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no Kubernetes client configuration from "), out.err
    assert "Traceback" not in out.err and "--kubeconfig" in lines[0]
    assert (env.get("KUBECONFIG") or "the in-cluster service account") in lines[0]
