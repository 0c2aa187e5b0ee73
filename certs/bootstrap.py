"""Webhook serving certificates: in-cluster self-management and local generation.

``cogate certs bootstrap`` keeps the webhook's TLS material in a Secret, the way
Kueue's (and controller-runtime's) cert rotator does, so the chart needs no
cert-manager:

1. read the Secret ``--secret-name`` in ``--namespace``; if absent, build a CA and a
   serving certificate for the Service's DNS names and *create* it. Several webhook
   replicas start at once: on ``409 AlreadyExists`` the one that lost reads the
   winner's Secret and uses it;
2. if the Secret's material is unusable or expires within ``--rotate-before-days``
   (default 30), issue a new serving certificate (re-using the CA while the CA itself
   has that long left) and *update* the Secret with its ``resourceVersion``; on
   ``409 Conflict`` re-read and start over;
3. set ``caBundle`` of our entries in the MutatingWebhookConfiguration
   ``--webhook-config-name`` with a JSON Patch (``test`` the entry's name, then
   ``add`` the bundle), only where it differs -- before the files change, so the API
   server trusts a new CA before a replica serves a certificate it signed;
4. write ``tls.crt``, ``tls.key`` and ``ca.crt`` into ``--cert-dir`` (atomic renames,
   only when the content changed, so the webhook's file watcher reloads once).

With ``--loop SECONDS`` it repeats forever (a sidecar), else it runs once (an init
container). ``cogate certs generate --out DIR --dns NAME...`` writes a CA and a
serving certificate for local use (a webhook run outside the cluster).

Secret data keys: ``ca.crt`` (PEM bundle, current CA first, then a previous CA that is
still valid, so replicas serving the old certificate keep working during a CA
rotation), ``ca.key``, ``tls.crt``, ``tls.key``.

The decisions (:func:`rotation_reason`, :func:`build_secret_data`,
:func:`ca_bundle_patch`) are pure functions over plain data; the functions taking an
API client do the I/O. Certificates and keys come from :mod:`cogate.certs.pki`
(ECDSA P-256, SHA-256; CA 10 years, serving certificate 1 year: ``--ca-validity-days``,
``--cert-validity-days``, which must satisfy rotate-before < certificate <= CA validity).
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cogate import cliargs, logs
from cogate.kube import api_client, api_status, own_namespace, retrying

from . import pki

__all__ = [
    "SECRET_KEYS",
    "service_dns_names",
    "rotation_reason",
    "build_secret_data",
    "secret_body",
    "decode_secret_data",
    "ca_bundle_patch",
    "ensure_secret",
    "write_cert_files",
    "patch_ca_bundle",
    "bootstrap_once",
    "main",
]

log = logging.getLogger("cogate.certs")

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
SECRET_KEYS = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
DAY = 86400.0
DEFAULT_ROTATE_BEFORE_DAYS = 30
CA_DAYS = 3650
LEAF_DAYS = 365
#: Seconds a certificate may outlive the configured validity before it is replaced (clock
#: steps between issuing and checking).
VALIDITY_SLACK = 60.0


# ------------------------------------------------------------------ pure part
def service_dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    """DNS names a Service is reached by: ``svc``, ``svc.ns``, ``svc.ns.svc``, ``svc.ns.svc.<domain>``.

    kube-apiserver calls a webhook at ``<service>.<namespace>.svc``. Raises ``ValueError``
    on an empty service or namespace.
    """
    if not service or not namespace:
        raise ValueError(f"service and namespace must be non-empty, got {service!r}, {namespace!r}")
    names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
    if cluster_domain:
        names.append(f"{service}.{namespace}.svc.{cluster_domain}")
    return names


def _sans(cert) -> set[str]:
    from cryptography import x509

    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return set(ext.value.get_values_for_type(x509.DNSName))


def rotation_reason(data: Mapping[str, bytes] | None, dns_names: Sequence[str], now: float,
                    rotate_before: float = DEFAULT_ROTATE_BEFORE_DAYS * DAY, ca_days: float = CA_DAYS,
                    leaf_days: float = LEAF_DAYS) -> str | None:
    """Why the Secret data needs new material, or ``None`` if it is good.

    ``data``: decoded Secret data (key -> PEM bytes) or ``None`` for no Secret.
    ``now`` and ``rotate_before`` in seconds. Checks: every key present and parsable,
    the keys match their certificates, the serving certificate is signed by the CA,
    covers every name in ``dns_names`` and is valid for at least ``rotate_before`` more
    seconds, and so is the CA; the serving certificate is not valid for longer than a new
    one would be (``leaf_days`` plus :data:`VALIDITY_SLACK`), so that lowering the configured
    validity takes effect at the next check. The CA is judged by its expiry only: replicas
    running with different settings (during a rollout) may then disagree about serving
    certificates, all signed by one CA, but never roll the CA back and forth (a CA two
    rollovers old is no longer in ``caBundle``). ``ca_days`` is the validity of a new CA.
    """
    if data is None:
        return "no secret"
    missing = [k for k in SECRET_KEYS if not data.get(k)]
    if missing:
        return f"missing keys {missing}"
    try:
        cas = pki.load_certs_pem(data[CA_CERT])
        ca_key = pki.load_key_pem(data[CA_KEY])
        leaf = pki.load_cert_pem(data[TLS_CERT])
        leaf_key = pki.load_key_pem(data[TLS_KEY])
    except ValueError as exc:
        return f"unparsable: {exc}"
    ca = cas[0]
    if not pki.key_matches(ca, ca_key):
        return f"{CA_KEY} does not match {CA_CERT}"
    if not pki.key_matches(leaf, leaf_key):
        return f"{TLS_KEY} does not match {TLS_CERT}"
    import datetime as _dt

    at = _dt.datetime.fromtimestamp(now, tz=_dt.timezone.utc)
    try:
        pki.verify_issued_by(leaf, ca, at=at)
    except ValueError as exc:
        return f"{TLS_CERT} not valid under {CA_CERT}: {exc}"
    absent = sorted(set(dns_names) - _sans(leaf))
    if absent:
        return f"{TLS_CERT} lacks DNS names {absent}"
    for what, cert in ((TLS_CERT, leaf), (CA_CERT, ca)):
        left = pki.not_after(cert) - now
        if left < rotate_before:
            return f"{what} expires in {_days(left)} (rotating at {_days(rotate_before)})"
    left = pki.not_after(leaf) - now
    if left > leaf_days * DAY + VALIDITY_SLACK:
        return f"{TLS_CERT} is valid {_days(left)} more, longer than the configured {_days(leaf_days * DAY)}"
    return None


def _days(seconds: float) -> str:
    return f"{seconds / DAY:.1f} days" if seconds >= DAY else f"{seconds:.0f} s"


def build_secret_data(dns_names: Sequence[str], now: float, previous: Mapping[str, bytes] | None = None,
                      rotate_before: float = DEFAULT_ROTATE_BEFORE_DAYS * DAY,
                      ip_addresses: Sequence[str] = (), ca_days: float = CA_DAYS,
                      leaf_days: float = LEAF_DAYS) -> dict[str, bytes]:
    """New Secret data (key -> PEM bytes) with a serving certificate for ``dns_names``
    (and ``ip_addresses``, as IP SANs), valid ``leaf_days`` (capped at the CA's expiry);
    a new CA is valid ``ca_days`` (fractions of a day allowed).

    The CA of ``previous`` is re-used when it parses, matches its key and is valid for
    at least ``rotate_before`` more seconds (so ``caBundle`` does not change); otherwise a
    new CA is made and the previous CA, if still valid, is appended to ``ca.crt`` -- also
    when ``ca.key`` was removed from the Secret, which is how an operator rolls the CA over
    at once.
    The common name is the first DNS name. Raises ``ValueError`` on empty ``dns_names``.
    """
    if not dns_names:
        raise ValueError("dns_names: a serving certificate needs at least one DNS name")
    ca = ca_key = None
    old_cas: list = []
    if previous and previous.get(CA_CERT):
        try:
            old_cas = pki.load_certs_pem(previous[CA_CERT])
        except ValueError:
            old_cas = []
        try:
            key = pki.load_key_pem(previous[CA_KEY]) if previous.get(CA_KEY) else None
        except ValueError:
            key = None
        if old_cas and key is not None and pki.key_matches(old_cas[0], key) \
                and pki.not_after(old_cas[0]) - now >= rotate_before:
            ca, ca_key = old_cas[0], key
    bundle: list = []
    if ca is None:
        ca, ca_key = pki.new_ca(f"cogate-webhook-ca@{int(now)}", days=ca_days)
        bundle = [c for c in old_cas[:1] if pki.not_after(c) > now]
    else:
        bundle = [c for c in old_cas[1:] if pki.not_after(c) > now]
    leaf, leaf_key = pki.issue(ca, ca_key, dns_names[0], dns_names=list(dns_names),
                               ip_addresses=list(ip_addresses), days=leaf_days)
    return {
        CA_CERT: b"".join(pki.cert_to_pem(c) for c in [ca, *bundle]),
        CA_KEY: pki.key_to_pem(ca_key),
        TLS_CERT: pki.cert_to_pem(leaf),
        TLS_KEY: pki.key_to_pem(leaf_key),
    }


def decode_secret_data(data: Mapping[str, str] | None) -> dict[str, bytes] | None:
    """Secret ``data`` as the API returns it (base64 text) -> key -> bytes. Bad base64 is dropped."""
    if data is None:
        return None
    out: dict[str, bytes] = {}
    for k, v in data.items():
        try:
            out[k] = base64.b64decode(v or "", validate=True)
        except (ValueError, TypeError):
            continue
    return out


def secret_body(name: str, namespace: str, data: Mapping[str, bytes], resource_version: str | None = None) -> dict[str, Any]:
    """The Secret object (API JSON) holding ``data``; with ``resource_version`` for an update."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "labels": {"app.kubernetes.io/name": "cogate", "app.kubernetes.io/component": "webhook-cert"}}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
            "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()}}


def ca_bundle_patch(config: Mapping[str, Any], ca_pem: bytes, webhook_names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """JSON Patch setting ``clientConfig.caBundle`` of the webhook entries named in ``webhook_names``.

    ``config`` is the MutatingWebhookConfiguration (API JSON); ``webhook_names`` ``None``
    means every entry. Entries already carrying this bundle are skipped, so an empty
    list means nothing to do. Each change is guarded by a ``test`` of the entry's name
    (the list may have changed since it was read).
    """
    want = base64.b64encode(ca_pem).decode("ascii")
    names = None if webhook_names is None else set(webhook_names)
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(config.get("webhooks") or []):
        name = hook.get("name")
        if names is not None and name not in names:
            continue
        if (hook.get("clientConfig") or {}).get("caBundle") == want:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": name})
        ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want})
    return ops


# ------------------------------------------------------------------ I/O part
def ensure_secret(core, namespace: str, name: str, dns_names: Sequence[str], now: float | None = None,
                  rotate_before: float = DEFAULT_ROTATE_BEFORE_DAYS * DAY, attempts: int = 5,
                  ca_days: float = CA_DAYS, leaf_days: float = LEAF_DAYS) -> dict[str, bytes]:
    """Make the Secret hold valid material and return its decoded data (new material is
    valid ``ca_days`` / ``leaf_days``, see :func:`build_secret_data`).

    ``core`` is a ``kubernetes.client.CoreV1Api``. Creates the Secret if absent (on 409
    reads the one another replica created), updates it when :func:`rotation_reason`
    says so (on 409 re-reads). Raises ``RuntimeError`` after ``attempts`` lost races
    and lets other ``ApiException`` errors through (our own rule is 409 -> re-read; the
    retry loop is :func:`cogate.kube.retrying`).
    """
    from kubernetes.client.exceptions import ApiException

    def attempt() -> dict[str, bytes]:
        t = time.time() if now is None else now
        try:
            secret = core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if api_status(exc) != 404:
                raise
            secret = None
        data = decode_secret_data(secret.data) if secret is not None else None
        reason = rotation_reason(data, dns_names, t, rotate_before, ca_days=ca_days, leaf_days=leaf_days)
        if reason is None:
            return data  # type: ignore[return-value]
        log.info("secret %s/%s: issuing new certificate (%s)", namespace, name, reason)
        fresh = build_secret_data(dns_names, t, data, rotate_before, ca_days=ca_days, leaf_days=leaf_days)
        if secret is None:
            core.create_namespaced_secret(namespace, secret_body(name, namespace, fresh))
        else:
            rv = secret.metadata.resource_version
            core.replace_namespaced_secret(name, namespace, secret_body(name, namespace, fresh, rv))
        return fresh

    def lost_race(exc: BaseException) -> bool:
        if isinstance(exc, ApiException) and api_status(exc) == 409:
            log.info("secret %s/%s: another replica wrote it first; re-reading", namespace, name)
            return True
        return False

    try:
        return retrying(attempt, attempts=attempts, again=lost_race)
    except ApiException as exc:
        if api_status(exc) == 409:
            raise RuntimeError(f"secret {namespace}/{name}: lost {attempts} write races in a row") from exc
        raise


def write_cert_files(directory: str | os.PathLike[str], data: Mapping[str, bytes]) -> list[Path]:
    """Write ``tls.crt``, ``tls.key``, ``ca.crt`` into ``directory``; returns the files changed.

    Files whose content is already equal are not touched (the webhook reloads on change).
    """
    changed = []
    for key in (TLS_CERT, TLS_KEY, CA_CERT):
        path = Path(directory) / key
        try:
            if path.read_bytes() == data[key]:
                continue
        except FileNotFoundError:
            pass
        pki.write_pem(path, data[key])
        changed.append(path)
    return changed


def patch_ca_bundle(admission, config_name: str, ca_pem: bytes, webhook_names: Iterable[str] | None = None) -> bool:
    """Set ``caBundle`` on our entries of MutatingWebhookConfiguration ``config_name``.

    ``admission`` is a ``kubernetes.client.AdmissionregistrationV1Api``. Returns ``True``
    when a patch was sent. API errors (404 when the configuration does not exist yet)
    propagate.
    """
    from kubernetes.client import ApiClient

    obj = admission.read_mutating_webhook_configuration(config_name)
    config = ApiClient().sanitize_for_serialization(obj)
    ops = ca_bundle_patch(config, ca_pem, webhook_names)
    if not ops:
        return False
    admission.patch_mutating_webhook_configuration(config_name, ops, _content_type="application/json-patch+json")
    log.info("mutatingwebhookconfiguration %s: caBundle updated (%d entries)", config_name, len(ops) // 2)
    return True


def bootstrap_once(args: argparse.Namespace, core, admission) -> None:
    """One pass: Secret, caBundle, files. Raises on API errors.

    ``caBundle`` is set before the files change: after a CA rollover the bundle holds the new
    and the previous CA, so the API server trusts the new certificate before any replica
    serves it (the other order fails webhook calls until the API server sees the new bundle).
    """
    names = service_dns_names(args.service_name, args.namespace, args.cluster_domain)
    data = ensure_secret(core, args.namespace, args.secret_name, names, rotate_before=args.rotate_before_days * DAY,
                         ca_days=args.ca_validity_days, leaf_days=args.cert_validity_days)
    if args.webhook_config_name:
        patch_ca_bundle(admission, args.webhook_config_name, data[CA_CERT], args.webhook_name or None)
    changed = write_cert_files(args.cert_dir, data)
    if changed:
        log.info("wrote %s", ", ".join(str(p) for p in changed))


def _cmd_bootstrap(args: argparse.Namespace) -> int:
    from kubernetes import client
    from kubernetes.config import ConfigException

    if not args.namespace:
        print("error: --namespace not given and POD_NAMESPACE/service account namespace unavailable", file=sys.stderr)
        return 2
    try:
        api = api_client(args.kubeconfig)
    except (ConfigException, OSError) as exc:  # no kubeconfig, none in-cluster, an unreadable file
        where = args.kubeconfig or os.environ.get("KUBECONFIG") or "the in-cluster service account"
        print(f"error: no Kubernetes client configuration from {where}: {str(exc).strip().splitlines()[0]}"
              " (pass --kubeconfig, or run in a pod)", file=sys.stderr)
        return 1
    core, admission = client.CoreV1Api(api), client.AdmissionregistrationV1Api(api)
    while True:
        try:
            bootstrap_once(args, core, admission)
        except Exception as exc:  # noqa: BLE001 - a loop keeps going; a one-shot run reports and fails
            if not args.loop:
                log.error("certificate bootstrap failed: %s", exc)
                return 1
            log.warning("certificate bootstrap failed, retrying in %ss: %s", args.retry, exc)
            time.sleep(args.retry)
            continue
        if not args.loop:
            return 0
        time.sleep(args.loop)


def _cmd_generate(args: argparse.Namespace) -> int:
    try:
        data = build_secret_data(args.dns, time.time(), ip_addresses=args.ip)
        out = Path(args.out)
        for key_name in SECRET_KEYS:
            pki.write_pem(out / key_name, data[key_name])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(SECRET_KEYS)} to {out}")
    return 0


def _dns_name(text: str) -> str:
    """``--dns``: a DNS name :func:`cogate.certs.pki.check_dns_name` accepts (a usage error naming it)."""
    try:
        return pki.check_dns_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("dns_names: ")) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cogate certs",
        description="Create and renew the webhook's TLS certificate: in the cluster, kept in a Secret "
                    "(bootstrap), or written to a directory for local use (generate).",
    )
    cliargs.add_log_flags(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{bootstrap,generate}")

    b = sub.add_parser(
        "bootstrap",
        help="keep the webhook certificate in a Secret, write it to files, set the webhook's caBundle",
        description="Keep the webhook's CA and serving certificate in a Secret (creating or renewing them), "
                    "write them to --cert-dir and set the caBundle of the MutatingWebhookConfiguration.",
    )
    b.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: $KUBECONFIG, then the in-cluster service account)")
    b.add_argument("--namespace", default=own_namespace(),
                   help="namespace of the Secret and the Service (default: $POD_NAMESPACE, else the pod's "
                        "service-account namespace)")
    b.add_argument("--secret-name", metavar="NAME", default="cogate-webhook-cert",
                   help="Secret holding the CA and the serving certificate (default: %(default)s)")
    b.add_argument("--service-name", metavar="NAME", default="cogate-webhook",
                   help="webhook Service; the certificate is for <service>.<namespace>.svc (default: %(default)s)")
    b.add_argument("--cluster-domain", metavar="DOMAIN", default="cluster.local",
                   help="cluster DNS domain, also put in the certificate (default: %(default)s)")
    b.add_argument("--cert-dir", metavar="DIR", default="/tmp/k8s-webhook-server/serving-certs",
                   help="directory for tls.crt, tls.key, ca.crt (default: %(default)s)")
    b.add_argument("--webhook-config-name", metavar="NAME", default="",
                   help="MutatingWebhookConfiguration whose caBundle to set (default: none, do not patch)")
    b.add_argument("--webhook-name", metavar="NAME", action="append", default=[],
                   help="webhook entry to patch, repeatable (default: every entry of the configuration)")
    b.add_argument("--rotate-before-days", metavar="DAYS", type=float, default=DEFAULT_ROTATE_BEFORE_DAYS,
                   help="renew when the certificate or the CA has fewer days left (default: %(default)s)")
    b.add_argument("--cert-validity-days", metavar="DAYS", type=cliargs.positive_days, default=LEAF_DAYS,
                   help="validity of a new serving certificate, capped at the CA's (default: %(default)s)")
    b.add_argument("--ca-validity-days", metavar="DAYS", type=cliargs.positive_days, default=CA_DAYS,
                   help="validity of a new CA (default: %(default)s)")
    b.add_argument("--loop", type=float, default=0.0, metavar="SECONDS",
                   help="repeat every SECONDS, as a sidecar; 0 runs once, as an init container (default: %(default)s)")
    b.add_argument("--retry", type=float, default=10.0, metavar="SECONDS",
                   help="wait after a failed pass in loop mode (default: %(default)s)")

    g = sub.add_parser(
        "generate",
        help="write a CA and a serving certificate to a directory (local use)",
        description="Write a new CA and a serving certificate (tls.crt, tls.key, ca.crt, ca.key) to a directory, "
                    "for running the webhook outside a cluster.",
    )
    g.add_argument("--out", metavar="DIR", required=True, help="output directory (required)")
    g.add_argument("--dns", metavar="NAME", action="append", required=True, type=_dns_name,
                   help="DNS name for the certificate (RFC 1123; a leading '*.' allowed), repeatable; the first "
                        "is the subject (required)")
    g.add_argument("--ip", metavar="ADDRESS", action="append", default=[],
                   help="IP address for the certificate, repeatable (default: none)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``cogate certs bootstrap|generate``. Exit codes: 0 ok, 1 API failure, 2 usage error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "bootstrap" and not (
            args.rotate_before_days < args.cert_validity_days <= args.ca_validity_days):
        parser.error(f"need --rotate-before-days ({args.rotate_before_days:g}) < --cert-validity-days "
                     f"({args.cert_validity_days:g}) <= --ca-validity-days ({args.ca_validity_days:g}): "
                     f"otherwise every pass would issue a new certificate")
    logs.configure(args.log_level, args.log_format)
    if args.command == "generate":
        return _cmd_generate(args)
    return _cmd_bootstrap(args)


if __name__ == "__main__":
    sys.exit(main())
