"""Kubeconfigs of the local cluster's components: one client certificate and one file each.

Used by the control plane (:mod:`cogate.localcluster.cluster`: admin, kube-scheduler,
kube-controller-manager, kwok) and the real node (:mod:`cogate.localcluster.host.realnode`:
kubelet, kube-proxy), so both write the same shape:

.. code-block:: yaml

    clusters: [{name: cogate-local, cluster: {server: <server>, certificate-authority: <ca file>}}]
    users: [{name: <user>, user: {client-certificate: <cert file>, client-key: <key file>}}]
    contexts: [{name: cogate-local, context: {cluster: cogate-local, user: <user>}}]
    current-context: cogate-local
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import yaml

from cogate.certs import pki

__all__ = ["config", "write_client"]


def config(server: str, ca_file: Path, cert_file: Path, key_file: Path, user: str) -> dict[str, Any]:
    """The kubeconfig (as a dict, shape above) of ``user`` authenticating with a client certificate."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cogate-local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert_file), "client-key": str(key_file)}}],
        "contexts": [{"name": "cogate-local", "context": {"cluster": "cogate-local", "user": user}}],
        "current-context": "cogate-local",
    }


def write_client(path: Path, *, server: str, ca_cert, ca_key, ca_file: Path, pki_dir: Path, stem: str,
                 user: str, groups: Iterable[str] = ()) -> Path:
    """Issue a client certificate for ``user`` in ``groups`` (its organizations) signed by the
    cluster CA (``ca_cert``/``ca_key``, PEM at ``ca_file``), write it to
    ``<pki_dir>/<stem>-client.crt`` and ``.key``, and its kubeconfig for ``server`` to ``path``
    (mode 0600). Returns ``path``."""
    cert, key = pki.issue(ca_cert, ca_key, user, organizations=list(groups), server=False, client=True, days=365)
    cert_file = pki.write_pem(pki_dir / f"{stem}-client.crt", cert)
    key_file = pki.write_pem(pki_dir / f"{stem}-client.key", key)
    path.write_text(yaml.safe_dump(config(server, ca_file, cert_file, key_file, user)))
    path.chmod(0o600)
    return path
