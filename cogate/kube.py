"""How cogate's processes reach the API server and find their own namespace (one place).

Configuration order, as kubectl and client-go do it: an explicit kubeconfig path, else the
``KUBECONFIG`` environment variable, else the in-cluster service account.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Where the kubelet mounts the pod's namespace (in-cluster).
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def api_client(kubeconfig: str | None, pool_size: int | None = None) -> Any:
    """A ``kubernetes.client.ApiClient``; ``pool_size``: urllib3 connection pool size (None: default).

    Raises the client's ``ConfigException`` when no configuration is found.
    """
    from kubernetes import client, config

    cfg = client.Configuration()
    if kubeconfig or os.environ.get("KUBECONFIG"):
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    if pool_size is not None:
        cfg.connection_pool_maxsize = pool_size
    return client.ApiClient(cfg)


def own_namespace(default: str = "") -> str:
    """The namespace this process runs in: ``$POD_NAMESPACE``, else the service account's, else ``default``."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or default
    except OSError:
        return default
