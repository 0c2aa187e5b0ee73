"""How cogate's processes reach the API server, find their own namespace, and call the API (one place).

Configuration order, as kubectl and client-go do it: an explicit kubeconfig path, else the
``KUBECONFIG`` environment variable, else the in-cluster service account.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

#: Where the kubelet mounts the pod's namespace (in-cluster).
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def api_client(kubeconfig: str | None, pool_size: int | None = None) -> ApiClient:
    """A ``kubernetes.client.ApiClient``; ``pool_size``: urllib3 connection pool size (None: default).

    Raises the client's ``ConfigException`` when no configuration is found, naming a kubeconfig
    that does not exist (:func:`missing_kubeconfig`).
    """
    from kubernetes import client, config

    cfg = client.Configuration()
    if kubeconfig or os.environ.get("KUBECONFIG"):
        if missing := missing_kubeconfig(kubeconfig):
            raise config.ConfigException(missing)
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    if pool_size is not None:
        cfg.connection_pool_maxsize = pool_size
    return client.ApiClient(cfg)


def missing_kubeconfig(kubeconfig: str | None, default: str = "") -> str:
    """'' when the kubeconfig to load exists; else one line naming it and where it came from:
    ``"kubeconfig /x ($KUBECONFIG) does not exist"``. The file is ``kubeconfig`` (``--kubeconfig``),
    else the files of ``$KUBECONFIG`` (``:``-separated, as kubectl reads it: missing when none exists),
    else ``default`` ('' for none: then nothing is missing). The Kubernetes client's own error for
    these cases ("Invalid kube-config file. No configuration found.") names no file."""
    if kubeconfig:
        paths, source = [kubeconfig], "--kubeconfig"
    elif os.environ.get("KUBECONFIG"):
        paths, source = [p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p], "$KUBECONFIG"
    elif default:
        paths, source = [default], "the default"
    else:
        return ""
    if any(Path(p).expanduser().is_file() for p in paths):
        return ""
    return f"kubeconfig {', '.join(paths)} ({source}) does not exist"


def own_namespace(default: str = "") -> str:
    """The namespace this process runs in: ``$POD_NAMESPACE``, else the service account's, else ``default``."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or default
    except OSError:
        return default


# --------------------------------------------------------------------------- calling the API
#
# One way to call the API (kopf ``_cogs/clients/api.py`` ``request()``, client-go
# ``retry.OnError``): read the HTTP status and the JSON body here, retry transient errors
# here; each caller keeps only its own rule (e.g. 409/422 -> re-read and rebuild the patch).

T = TypeVar("T")


def api_status(exc: BaseException) -> int | None:
    """The HTTP status of an API error (``kubernetes.client.ApiException.status``), or None.

    None means the request got no answer: a connection error, a timeout, a client-side error.
    """
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def is_transient(exc: BaseException) -> bool:
    """Whether an error is worth retrying unchanged after a backoff: no HTTP status (connection
    reset, timeout), 429 Too Many Requests, or 5xx (client-go ``retry.OnError`` with
    ``IsTooManyRequests``/``IsServerTimeout``/``IsInternalError``, and kopf's retry rule)."""
    status = api_status(exc)
    return status is None or status == 429 or status >= 500


def json_body(resp: Any) -> dict[str, Any]:
    """The JSON object of a ``_preload_content=False`` response (or a dict a fake returns).

    Returns ``{}`` for an empty body; raises ``ValueError`` when the body is not JSON or not
    a JSON object.
    """
    if isinstance(resp, dict):
        return resp
    data = getattr(resp, "data", resp)
    if isinstance(data, (bytes, bytearray)):
        data = data.decode("utf-8", "replace")
    if not data:
        return {}
    if not isinstance(data, str):
        raise ValueError(f"response body is {type(data).__name__}, not JSON")
    obj = json.loads(data)  # json.JSONDecodeError is a ValueError
    if not isinstance(obj, dict):
        raise ValueError(f"response is not a JSON object but {type(obj).__name__}")
    return obj


@dataclass
class Backoff:
    """Exponential backoff with jitter: ``initial`` seconds doubling to ``maximum``, +-``jitter`` fraction.

    ``rand`` is injectable (``() -> float in [0, 1)``) so tests are deterministic.
    """

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    rand: Callable[[], float] = random.random
    _current: float = 0.0

    def next(self) -> float:
        """Seconds to wait before the next attempt; grows on each call until :meth:`reset`."""
        self._current = self.initial if self._current == 0.0 else min(self.maximum, self._current * self.factor)
        return self._current * (1.0 + self.jitter * (2.0 * self.rand() - 1.0))

    def reset(self) -> None:
        self._current = 0.0


def retrying(fn: Callable[[], T], *, attempts: int, backoff: Backoff | None = None,
             again: Callable[[BaseException], bool] | None = None,
             sleep: Callable[[float], None] = time.sleep) -> T:
    """``fn()``, called up to ``attempts`` times (>= 1) until it returns.

    After an error for which ``again(exc)`` holds (the caller's own rule, e.g. 409 Conflict:
    re-read and rebuild), ``fn`` is called again at once. With a ``backoff``, after a
    transient error (:func:`is_transient`) it is called again after ``backoff.next()``
    seconds of ``sleep``. Any other error, and the error of the last attempt, propagates.
    Without a ``backoff`` only ``again`` errors are retried.
    """
    if attempts < 1:
        raise ValueError(f"attempts: must be >= 1, got {attempts}")
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts:
                raise
            if again is not None and again(exc):
                continue
            if backoff is not None and is_transient(exc):
                sleep(backoff.next())
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover
