"""cogate.certs.pki: SANs, key usages, chain verification, PEM round trips, file modes."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cogate.certs import pki


@pytest.fixture(scope="module")
def ca():
    return pki.new_ca("cogate-test-ca", days=30)


def _ext(cert: x509.Certificate, cls):
    return cert.extensions.get_extension_for_class(cls)


def test_ca_is_a_ca_with_cert_sign_usage(ca):
    cert, key = ca
    bc = _ext(cert, x509.BasicConstraints)
    assert bc.critical and bc.value.ca is True and bc.value.path_length == 0
    ku = _ext(cert, x509.KeyUsage)
    assert ku.critical and ku.value.key_cert_sign and ku.value.crl_sign
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "cogate-test-ca"
    # self-signed: verifies against itself
    pki.verify_issued_by(cert, cert)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)


def test_ca_validity_window_is_days_from_now_with_skew():
    before = dt.datetime.now(dt.timezone.utc)
    cert, _ = pki.new_ca("c", days=10)
    after = dt.datetime.now(dt.timezone.utc)
    nb, na = cert.not_valid_before_utc, cert.not_valid_after_utc
    # X.509 times have second precision
    assert before - pki.CLOCK_SKEW - dt.timedelta(seconds=1) <= nb <= after - pki.CLOCK_SKEW
    assert before + dt.timedelta(days=10) - dt.timedelta(seconds=1) <= na <= after + dt.timedelta(days=10)
    assert pki.not_after(cert) == pytest.approx(na.timestamp())


def test_server_cert_sans_usages_and_chain(ca):
    ca_cert, ca_key = ca
    cert, key = pki.issue(ca_cert, ca_key, "webhook.cogate-system.svc",
                          dns_names=["webhook.cogate-system.svc", "localhost"],
                          ip_addresses=["127.0.0.1", ipaddress.ip_address("::1")], days=5)
    san = _ext(cert, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["webhook.cogate-system.svc", "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    eku = _ext(cert, x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    ku = _ext(cert, x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature and not ku.value.key_cert_sign
    assert not ku.value.key_encipherment  # EC key: no key transport
    assert _ext(cert, x509.BasicConstraints).value.ca is False
    assert cert.issuer == ca_cert.subject
    aki = _ext(cert, x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == _ext(ca_cert, x509.SubjectKeyIdentifier).value.digest
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    pki.verify_issued_by(cert, ca_cert)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == dt.timedelta(days=5) + pki.CLOCK_SKEW


def test_client_cert_groups_and_usage(ca):
    ca_cert, ca_key = ca
    cert, _ = pki.issue(ca_cert, ca_key, "admin", organizations=["system:masters", "devs"],
                        server=False, client=True)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["system:masters", "devs"]
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert list(_ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        _ext(cert, x509.SubjectAlternativeName)


def test_rsa_leaf_gets_key_encipherment(ca):
    ca_cert, ca_key = ca
    cert, key = pki.issue(ca_cert, ca_key, "r", dns_names=["r"], key=pki.new_key("rsa"))
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
    assert _ext(cert, x509.KeyUsage).value.key_encipherment


def test_rsa_ca_signs_ec_leaf():
    ca_cert, ca_key = pki.new_ca("rsa-ca", days=2, key=pki.new_rsa_key())
    cert, _ = pki.issue(ca_cert, ca_key, "x", dns_names=["x"], days=1)
    pki.verify_issued_by(cert, ca_cert)


def test_verification_fails_against_another_ca(ca):
    ca_cert, ca_key = ca
    other_cert, _ = pki.new_ca("other", days=2)
    cert, _ = pki.issue(ca_cert, ca_key, "x", dns_names=["x"])
    with pytest.raises(ValueError, match="cert"):
        pki.verify_issued_by(cert, other_cert)


def test_verification_fails_outside_validity(ca):
    ca_cert, ca_key = ca
    cert, _ = pki.issue(ca_cert, ca_key, "x", dns_names=["x"], days=1)
    with pytest.raises(ValueError, match="not valid at"):
        pki.verify_issued_by(cert, ca_cert, at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2))


def test_leaf_validity_capped_at_ca_expiry():
    ca_cert, ca_key = pki.new_ca("short", days=2)
    cert, _ = pki.issue(ca_cert, ca_key, "x", dns_names=["x"], days=365)
    assert cert.not_valid_after_utc <= ca_cert.not_valid_after_utc


def test_openssl_accepts_chain_for_tls(ca, tmp_path):
    """The stdlib ssl module (OpenSSL) loads the pair and trusts it via the CA: a real TLS check."""
    ca_cert, ca_key = ca
    cert, key = pki.issue(ca_cert, ca_key, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1"])
    pki.write_pem(tmp_path / "tls.crt", cert)
    pki.write_pem(tmp_path / "tls.key", key)
    pki.write_pem(tmp_path / "ca.crt", ca_cert)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    sin, sout, cin, cout = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s = server.wrap_bio(sin, sout, server_side=True)
    c = client.wrap_bio(cin, cout, server_hostname="localhost")
    done = {"s": False, "c": False}
    for _ in range(10):
        for name, obj, outb, inb in (("c", c, cout, sin), ("s", s, sout, cin)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            inb.write(outb.read())
        if all(done.values()):
            break
    assert all(done.values())
    assert c.getpeercert()["subject"] == ((("commonName", "localhost"),),)


@pytest.mark.parametrize("kind", ["ec", "rsa"])
def test_pem_round_trip(ca, kind):
    ca_cert, ca_key = ca
    cert, key = pki.issue(ca_cert, ca_key, "x", dns_names=["x"], key=pki.new_key(kind))
    assert pki.load_cert_pem(pki.cert_to_pem(cert)) == cert
    assert pki.load_key_pem(pki.key_to_pem(key)).private_numbers() == key.private_numbers()
    assert pki.key_to_pem(key).startswith(b"-----BEGIN PRIVATE KEY-----")
    pub = pki.load_public_key_pem(pki.public_key_to_pem(key))
    assert pub.public_numbers() == key.public_key().public_numbers()
    bundle = pki.cert_to_pem(cert) + pki.cert_to_pem(ca_cert)
    assert pki.load_certs_pem(bundle.decode()) == [cert, ca_cert]


def test_write_pem_modes_and_content(ca, tmp_path):
    ca_cert, ca_key = ca
    key_path = pki.write_pem(tmp_path / "sub" / "ca.key", ca_key)
    crt_path = pki.write_pem(tmp_path / "ca.crt", ca_cert)
    both = pki.write_pem(tmp_path / "both.pem", ca_cert, ca_key)
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(both.stat().st_mode) == 0o600
    assert stat.S_IMODE(crt_path.stat().st_mode) == 0o644
    assert pki.load_cert_pem(both.read_bytes()) == ca_cert
    assert pki.load_key_pem(both.read_bytes()).private_numbers() == ca_key.private_numbers()
    # overwrite keeps atomic replace semantics and leaves no temp files
    pki.write_pem(crt_path, ca_cert)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["both.pem", "ca.crt", "sub"]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"common_name": ""}, "common_name"),
        ({"days": 0}, "days"),
        ({"ip_addresses": ["not-an-ip"]}, "ip_addresses"),
        ({"ip_addresses": "127.0.0.1"}, "ip_addresses"),
        ({"dns_names": "a.example"}, "dns_names"),
        ({"dns_names": [], "ip_addresses": []}, "dns_names"),
        ({"server": False, "client": False}, "server"),
        ({"organizations": [""]}, "organizations"),
    ],
)
def test_issue_rejects_bad_arguments(ca, kwargs, field):
    ca_cert, ca_key = ca
    args = {"common_name": "x", "dns_names": ["x"]} | kwargs
    with pytest.raises(ValueError, match=field):
        pki.issue(ca_cert, ca_key, **args)


def test_issue_rejects_mismatched_ca_key(ca):
    ca_cert, _ = ca
    with pytest.raises(ValueError, match="ca_key"):
        pki.issue(ca_cert, pki.new_ec_key(), "x", dns_names=["x"])


def test_bad_inputs_to_key_and_pem_helpers():
    with pytest.raises(ValueError, match="kind"):
        pki.new_key("dsa")
    with pytest.raises(ValueError, match="bits"):
        pki.new_rsa_key(1024)
    with pytest.raises(ValueError, match="certificate PEM"):
        pki.load_cert_pem(b"garbage")
    with pytest.raises(ValueError, match="private key PEM"):
        pki.load_key_pem(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ValueError, match="objects"):
        pki.write_pem("/nonexistent/x")


def test_ca_with_dns_names_carries_them_as_subject_alt_names():
    from cryptography import x509

    cert, _ = pki.new_ca("training-operator-ca", days=2, dns_names=("training-operator-ca",))
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["training-operator-ca"]
    plain, _ = pki.new_ca("plain", days=2)
    assert not [e for e in plain.extensions if isinstance(e.value, x509.SubjectAlternativeName)]
    with pytest.raises(ValueError, match="dns_names"):
        pki.new_ca("bad", days=2, dns_names="one-string")


def test_traditional_key_pem_is_pkcs1_for_rsa():
    key = pki.new_rsa_key()
    assert pki.key_to_pem(key, traditional=True).startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert pki.key_to_pem(key).startswith(b"-----BEGIN PRIVATE KEY-----")
    assert pki.load_key_pem(pki.key_to_pem(key, traditional=True)).private_numbers() == key.private_numbers()
