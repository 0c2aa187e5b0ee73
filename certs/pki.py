"""Small X.509 toolkit: a CA, leaf certificates signed by it, keys and PEM files.

Used by the webhook's certificate bootstrap (``cogate.certs.bootstrap``) and by the
local control plane of the tests (``cogate.localcluster.cluster``). Everything is
built on ``cryptography``; nothing here does network or Kubernetes I/O.

Algorithms and defaults (the same choices as Kubernetes' ``client-go/util/cert``
and kubeadm, except that ECDSA is the default key type because it is fast):

- Keys: ECDSA on NIST P-256 (``"ec"``, default) or RSA 2048-bit, public exponent
  65537 (``"rsa"``; ``bits`` may raise it). Private keys are written as unencrypted
  PKCS#8 PEM (``-----BEGIN PRIVATE KEY-----``), public keys as SubjectPublicKeyInfo PEM.
- Signatures: SHA-256 (ECDSA-with-SHA256 or sha256WithRSAEncryption).
- Serial numbers: 159 random bits (RFC 5280 §4.1.2.2: positive, at most 20 octets).
- Validity: ``not_before`` is 5 minutes in the past (clock skew between hosts),
  ``not_after`` is ``days`` days after now. CA default 3650 days, leaf default 365 days.
- CA certificate: ``basicConstraints CA:TRUE, pathlen:0`` (critical), key usage
  ``keyCertSign, cRLSign, digitalSignature`` (critical), subject key identifier.
- Leaf certificate: ``basicConstraints CA:FALSE`` (critical), key usage
  ``digitalSignature`` (+ ``keyEncipherment`` for RSA keys) (critical), extended key
  usage ``serverAuth`` and/or ``clientAuth``, subjectAltName with the DNS names and
  IP addresses given, subject and authority key identifiers. Go's TLS stack (and so
  kube-apiserver calling a webhook) verifies host names only against the SANs, never
  the common name, so a serving certificate needs at least one SAN.
- Kubernetes client certificates: the common name is the user name, each
  ``organizations`` entry a group (e.g. ``system:masters``), as kube-apiserver's x509
  authenticator reads them.

DNS names in subjectAltName are checked (:func:`check_dns_name`: RFC 1123, an optional
leading ``*.``).

Errors: bad arguments raise ``ValueError`` naming the argument; unparsable PEM raises
``ValueError`` from ``cryptography`` wrapped with the kind of object expected.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Iterable, Union

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "PrivateKey",
    "key_matches",
    "PublicKey",
    "CLOCK_SKEW",
    "new_key",
    "new_ec_key",
    "new_rsa_key",
    "new_ca",
    "issue",
    "verify_issued_by",
    "cert_to_pem",
    "key_to_pem",
    "public_key_to_pem",
    "load_cert_pem",
    "load_certs_pem",
    "load_key_pem",
    "load_public_key_pem",
    "write_pem",
    "not_after",
]

#: Private key types produced and accepted here.
PrivateKey = Union[ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey]
#: Public key types produced and accepted here.
PublicKey = Union[ec.EllipticCurvePublicKey, rsa.RSAPublicKey]

#: How far ``not_before`` is back-dated, to tolerate clock skew between hosts.
CLOCK_SKEW = _dt.timedelta(minutes=5)

_PemObject = Union[x509.Certificate, ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey,
                   ec.EllipticCurvePublicKey, rsa.RSAPublicKey]


# --------------------------------------------------------------------------- keys

def new_ec_key() -> ec.EllipticCurvePrivateKey:
    """A fresh ECDSA private key on NIST P-256 (secp256r1)."""
    return ec.generate_private_key(ec.SECP256R1())


def new_rsa_key(bits: int = 2048) -> rsa.RSAPrivateKey:
    """A fresh RSA private key of ``bits`` bits (>= 2048), public exponent 65537.

    Raises ``ValueError`` if ``bits`` is below 2048 (NIST SP 800-131A minimum).
    """
    if not isinstance(bits, int) or isinstance(bits, bool) or bits < 2048:
        raise ValueError(f"bits: RSA keys need at least 2048 bits, got {bits!r}")
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def new_key(kind: str = "ec", *, bits: int = 2048) -> PrivateKey:
    """A fresh private key: ``kind="ec"`` (ECDSA P-256) or ``kind="rsa"`` (RSA ``bits`` bits).

    Raises ``ValueError`` naming ``kind`` for any other value.
    """
    if kind == "ec":
        return new_ec_key()
    if kind == "rsa":
        return new_rsa_key(bits)
    raise ValueError(f"kind: expected 'ec' or 'rsa', got {kind!r}")


# ------------------------------------------------------------------ certificates

def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _check_days(days: object) -> float:
    # Fractions of a day are allowed (short-lived certificates, e.g. to exercise rotation).
    if not isinstance(days, (int, float)) or isinstance(days, bool) or not 0 < days < float("inf"):
        raise ValueError(f"days: expected a positive number of days, got {days!r}")
    return days


def _check_name(common_name: object) -> str:
    if not isinstance(common_name, str) or not common_name or len(common_name) > 64:
        # RFC 5280 upper bound ub-common-name is 64 characters.
        raise ValueError(f"common_name: expected a non-empty string of at most 64 characters, got {common_name!r}")
    return common_name


def _check_key(key: object, what: str) -> PrivateKey:
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise ValueError(f"{what}: expected an EC or RSA private key, got {type(key).__name__}")
    return key  # type: ignore[return-value]


def new_ca(common_name: str, days: float = 3650, *, key: PrivateKey | None = None,
           dns_names: Iterable[str] = ()) -> tuple[x509.Certificate, PrivateKey]:
    """A self-signed CA certificate and its private key.

    ``days``: validity in days from now (``not_before`` back-dated by :data:`CLOCK_SKEW`).
    ``key``: the CA's key; a new ECDSA P-256 key when omitted.
    Extensions: basicConstraints CA:TRUE pathlen:0, keyUsage keyCertSign/cRLSign/
    digitalSignature, subjectKeyIdentifier (see module docstring), and subjectAltName with
    ``dns_names`` when given (open-policy-agent/cert-controller keeps a CA only when it verifies
    for its ``CAName`` as a DNS name, ``validCACert``). Signed with SHA-256.
    Raises ``ValueError`` naming the bad argument.
    """
    _check_name(common_name)
    _check_days(days)
    names = _strings(dns_names, "dns_names")
    key = _check_key(key, "key") if key is not None else new_ec_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(secrets.randbits(159) | 1)
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )
    if names:
        cert = cert.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
    return cert.sign(key, hashes.SHA256()), key


def _ip(value: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return value
    try:
        return ipaddress.ip_address(value)  # type: ignore[arg-type]
    except ValueError:
        raise ValueError(f"ip_addresses: {value!r} is not an IPv4 or IPv6 address") from None


#: One DNS label (RFC 1123 section 2.1: letters, digits and hyphens, not starting or ending
#: with a hyphen, 1-63 characters; host names compare case-insensitively).
_DNS_LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?")


def check_dns_name(name: object) -> str:
    """``name`` if it is a DNS name a certificate's subjectAltName may carry: labels of RFC 1123
    (letters, digits, inner hyphens, 1-63 characters each) joined by dots, at most 253
    characters, no trailing dot, optionally one leading ``*.`` wildcard label (RFC 6125 6.4.3;
    Go's ``crypto/x509`` matches only that form). Raises ``ValueError`` naming the name and what
    is wrong with it (e.g. ``cogate_webhook``: an underscore)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"dns_names: expected a non-empty string, got {name!r}")
    if len(name) > 253:
        raise ValueError(f"dns_names: {name[:40]!r}... is {len(name)} characters, more than 253 (RFC 1123)")
    labels = name.split(".")
    if labels[0] == "*" and len(labels) > 1:
        labels = labels[1:]
    for label in labels:
        if not _DNS_LABEL.fullmatch(label):
            why = ("an empty label (two dots, or a leading or trailing dot)" if not label else
                   "a label longer than 63 characters" if len(label) > 63 else
                   "a label starting or ending with a hyphen" if label[0] == "-" or label[-1] == "-" else
                   f"the character {next(c for c in label if not (c.isascii() and (c.isalnum() or c == '-')))!r}")
            raise ValueError(f"dns_names: {name!r} is not a valid DNS name (RFC 1123): {why}")
    return name


def _strings(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{what}: expected a sequence of strings, got the single string {values!r}")
    out = list(values)
    for v in out:
        if not isinstance(v, str) or not v:
            raise ValueError(f"{what}: expected non-empty strings, got {v!r}")
    return out


def key_matches(cert: x509.Certificate, key: PrivateKey) -> bool:
    """Whether ``key`` is the private key of ``cert`` (same SubjectPublicKeyInfo)."""
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def issue(
    ca_cert: x509.Certificate,
    ca_key: PrivateKey,
    common_name: str,
    *,
    dns_names: Iterable[str] = (),
    ip_addresses: Iterable[str | ipaddress.IPv4Address | ipaddress.IPv6Address] = (),
    organizations: Iterable[str] = (),
    server: bool = True,
    client: bool = False,
    days: float = 365,
    key: PrivateKey | None = None,
) -> tuple[x509.Certificate, PrivateKey]:
    """A leaf certificate for ``common_name`` signed by ``ca_cert``/``ca_key``, and its key.

    - ``dns_names``, ``ip_addresses``: subjectAltName entries (IPs as text or
      ``ipaddress`` objects). A server certificate needs at least one.
    - ``organizations``: subject O entries (Kubernetes groups for client certificates).
    - ``server`` / ``client``: extended key usages serverAuth / clientAuth; at least one.
    - ``days``: validity in days from now, capped at the CA's own ``not_after``.
    - ``key``: the leaf's key; a new ECDSA P-256 key when omitted.

    Raises ``ValueError`` naming the bad argument (no usage, server without SAN,
    malformed IP, CA key not matching ``ca_cert``, ...).
    """
    _check_name(common_name)
    _check_days(days)
    _check_key(ca_key, "ca_key")
    key = _check_key(key, "key") if key is not None else new_ec_key()
    if not key_matches(ca_cert, ca_key):
        raise ValueError("ca_key: does not match the public key of ca_cert")
    dns = [check_dns_name(d) for d in _strings(dns_names, "dns_names")]
    if isinstance(ip_addresses, str):
        raise ValueError(f"ip_addresses: expected a sequence of addresses, got the single string {ip_addresses!r}")
    ips = [_ip(v) for v in ip_addresses]
    orgs = _strings(organizations, "organizations")
    if not server and not client:
        raise ValueError("server/client: a certificate needs at least one of serverAuth or clientAuth")
    if server and not dns and not ips:
        raise ValueError("dns_names/ip_addresses: a serving certificate needs at least one subjectAltName")

    now = _now()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    public = key.public_key()
    not_after = min(now + _dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(secrets.randbits(159) | 1)
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=isinstance(key, rsa.RSAPrivateKey),
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if dns or ips:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns] + [x509.IPAddress(i) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def verify_issued_by(cert: x509.Certificate, ca_cert: x509.Certificate, *, at: _dt.datetime | None = None) -> None:
    """Check that ``cert`` was signed by ``ca_cert`` and both are valid at ``at`` (default now).

    Checks the issuer name, the signature (``Certificate.verify_directly_issued_by``)
    and the validity windows. Raises ``ValueError`` saying which check failed.
    """
    at = at or _now()
    try:
        cert.verify_directly_issued_by(ca_cert)
    except InvalidSignature:
        raise ValueError("cert: signature does not verify with the CA's public key") from None
    except (ValueError, TypeError) as exc:
        raise ValueError(f"cert: not issued by this CA: {exc}") from None
    for what, c in (("cert", cert), ("ca_cert", ca_cert)):
        if not (c.not_valid_before_utc <= at <= c.not_valid_after_utc):
            raise ValueError(f"{what}: not valid at {at.isoformat()} "
                             f"(valid {c.not_valid_before_utc.isoformat()} .. {c.not_valid_after_utc.isoformat()})")


def not_after(cert: x509.Certificate) -> float:
    """End of ``cert``'s validity as float epoch seconds (UTC)."""
    return cert.not_valid_after_utc.timestamp()


# -------------------------------------------------------------------------- PEM

def cert_to_pem(cert: x509.Certificate) -> bytes:
    """PEM (``CERTIFICATE``) encoding of ``cert``."""
    return cert.public_bytes(serialization.Encoding.PEM)


def key_to_pem(key: PrivateKey, *, traditional: bool = False) -> bytes:
    """Unencrypted PKCS#8 PEM (``PRIVATE KEY``) encoding of a private key; ``traditional``: the
    older per-algorithm form instead (``RSA PRIVATE KEY``, PKCS#1, for RSA; ``EC PRIVATE KEY``,
    SEC 1, for ECDSA), which Go's ``x509.ParsePKCS1PrivateKey`` readers need (e.g.
    open-policy-agent/cert-controller for its CA key)."""
    _check_key(key, "key")
    fmt = serialization.PrivateFormat.TraditionalOpenSSL if traditional else serialization.PrivateFormat.PKCS8
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())


def public_key_to_pem(key: PrivateKey | PublicKey) -> bytes:
    """SubjectPublicKeyInfo PEM (``PUBLIC KEY``) of a public key, or of a private key's public half."""
    if isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        key = key.public_key()
    if not isinstance(key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey)):
        raise ValueError(f"key: expected an EC or RSA key, got {type(key).__name__}")
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _bytes(data: bytes | str) -> bytes:
    return data.encode("ascii") if isinstance(data, str) else data


def load_cert_pem(data: bytes | str) -> x509.Certificate:
    """The first certificate in PEM ``data``. Raises ``ValueError`` if there is none."""
    certs = load_certs_pem(data)
    return certs[0]


def load_certs_pem(data: bytes | str) -> list[x509.Certificate]:
    """Every certificate in PEM ``data`` (a bundle), in order. Raises ``ValueError`` if none parse."""
    try:
        certs = x509.load_pem_x509_certificates(_bytes(data))
    except ValueError as exc:
        raise ValueError(f"certificate PEM: {exc}") from None
    if not certs:
        raise ValueError("certificate PEM: no CERTIFICATE block found")
    return certs


def load_key_pem(data: bytes | str) -> PrivateKey:
    """An unencrypted EC or RSA private key from PEM (PKCS#8, SEC1 or PKCS#1).

    Raises ``ValueError`` for unparsable data, encrypted keys or other key types.
    """
    try:
        key = serialization.load_pem_private_key(_bytes(data), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"private key PEM: {exc}") from None
    return _check_key(key, "private key PEM")


def load_public_key_pem(data: bytes | str) -> PublicKey:
    """An EC or RSA public key from SubjectPublicKeyInfo PEM. Raises ``ValueError`` otherwise."""
    try:
        key = serialization.load_pem_public_key(_bytes(data))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"public key PEM: {exc}") from None
    if not isinstance(key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey)):
        raise ValueError(f"public key PEM: expected an EC or RSA key, got {type(key).__name__}")
    return key


def _to_pem(obj: _PemObject | bytes) -> tuple[bytes, bool]:
    """(PEM bytes, is secret) of one object."""
    if isinstance(obj, x509.Certificate):
        return cert_to_pem(obj), False
    if isinstance(obj, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        return key_to_pem(obj), True
    if isinstance(obj, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey)):
        return public_key_to_pem(obj), False
    if isinstance(obj, bytes):
        return obj, b"PRIVATE KEY-----" in obj
    raise ValueError(f"objects: cannot PEM-encode a {type(obj).__name__}")


def write_pem(path: str | os.PathLike[str], *objects: _PemObject | bytes) -> Path:
    """Write certificates, keys and/or ready PEM bytes to ``path``, concatenated in order.

    The file is written atomically (temporary file in the same directory, fsync,
    rename), so a reader watching it (e.g. the webhook reloading its TLS files) never
    sees half a file. Mode is ``0600`` when any object is a private key, else ``0644``.
    Parent directories are created (mode ``0700``). Returns the path.
    Raises ``ValueError`` when no object is given or one cannot be encoded.
    """
    if not objects:
        raise ValueError("objects: nothing to write")
    parts = [_to_pem(o) for o in objects]
    data = b"".join(p if p.endswith(b"\n") else p + b"\n" for p, _ in parts)
    secret = any(s for _, s in parts)
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600 if secret else 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path
