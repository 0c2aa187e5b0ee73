"""The release feature's watches (issue 28), with ``--validate-releases auto``: the admission webhook
configurations and policies that could refuse a release patch (:mod:`cogate.controller.release.refusers`),
each kind the API server serves in ``admissionregistration.k8s.io/v1`` (:mod:`cogate.controller.kube.features`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from cogate.controller.kube.features import Apis, Feature, InformerSpec, Watches
from cogate.controller.kube.informer import admission_source, name_key
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.release import refusers

#: The controller's start-up lines keep the controller's logger.
log = logging.getLogger("cogate.controller")

T = TypeVar("T")


def admission_informers(api_client: Any, make: Callable[..., T]) -> tuple[tuple[T, ...], bool]:
    """Informers (records: names of pod UPDATE interceptors, :mod:`cogate.controller.release.refusers`) for
    each of ``refusers.ADMISSION_RESOURCES`` the API server serves in ``admissionregistration.k8s.io/v1``,
    made by ``make(name, source, key, convert)``, and whether they cover every such resource it serves
    in any version (discovery: a kind served only in a beta or alpha version, or a failed discovery,
    leaves ``--validate-releases auto`` dry-running every release)."""
    from kubernetes import client

    #: The client's typed API per version of the group (a version it lacks cannot be read).
    version_apis = {"v1": "AdmissionregistrationV1Api", "v1beta1": "AdmissionregistrationV1beta1Api",
                    "v1alpha1": "AdmissionregistrationV1alpha1Api"}
    served: dict[str, set[str]] = {}
    try:
        group = client.AdmissionregistrationApi(api_client).get_api_group()
        for v in group.versions or ():
            api_class = getattr(client, version_apis.get(v.version, ""), None)
            if api_class is None:
                raise RuntimeError(f"admissionregistration.k8s.io/{v.version} is unknown to this Kubernetes client")
            resources = api_class(api_client).get_api_resources().resources or ()
            served[v.version] = {r.name for r in resources}
        watched, unwatched = refusers.watched_and_unwatched(served)
        adm = client.AdmissionregistrationV1Api(api_client)
        listers = {plural: getattr(adm, "list_" + _snake(refusers.ADMISSION_RESOURCES[plural]), None)
                   for plural in watched}
    except Exception as exc:  # noqa: BLE001
        log.warning("cannot tell which admission webhooks and policies could refuse release patches (discovery "
                    "failed: %s); every release patch is dry-run first", exc)
        return (), False
    unwatched += sorted(p for p, lister in listers.items() if lister is None)  # not in this client
    if unwatched:
        log.info("admission resources cogate cannot watch (%s: served only in a pre-release version, or unknown "
                 "to this client): every release patch is dry-run first", ", ".join(unwatched))
    informers = tuple(make(plural, admission_source(lister), name_key,
                           refusers.interceptors_of(refusers.ADMISSION_RESOURCES[plural]))
                      for plural, lister in listers.items() if lister is not None)
    return informers, not unwatched


def _snake(kind: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in kind).lstrip("_")


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """The admission informers of :func:`admission_informers` into the caches' ``admission``, and
    ``admission_known``. Cluster-scoped: ``namespace`` does not narrow them."""
    specs, known = admission_informers(apis.api_client, lambda *spec: InformerSpec("admission", *spec))
    return Watches(specs, {"admission_known": known})


FEATURE = Feature("release", informers, enabled=lambda config: config.validate_releases == "auto")
