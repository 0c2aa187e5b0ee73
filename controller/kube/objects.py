"""The controller's writes of whole objects: create, read, delete (PodTemplates, custom objects such
as ProvisioningRequests, PodDisruptionBudgets).

The caller names a custom object's API coordinates (:class:`CustomResource`: group, version, plural,
kind), so this folder knows no feature's API: the provisioning room passes the ProvisioningRequest's
(:data:`cogate.controller.provisioning.room.PROVISIONING_REQUESTS`). Each write keeps only its own rule:

- create: a name that exists already (409) counts as ``failed`` (names are new per attempt, so the
  object is another's); the API server's answer is handed back for the caller's condition;
- delete (uid precondition when given): 404/409 -> ``gone`` (already gone, or replaced);
- PodDisruptionBudgets (opt-in): create, else read and patch ``minAvailable`` of one cogate made
  (:data:`cogate.controller.status.lifecycle.MANAGED_BY_LABEL`); delete only one cogate made.

No retry here: a failed write is tried again by a later pass. Results:
:class:`~cogate.controller.kube.results.WriteResult`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from cogate import api
from cogate.controller.kube.results import REQUEST_TIMEOUT, WriteResult, answer_of
from cogate.controller.status.lifecycle import MANAGED_BY_LABEL
from cogate.controller.status.notices import log_extra
from cogate.kube import api_status, json_body

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api, CustomObjectsApi

log = logging.getLogger(__name__)

#: The kind of a PodTemplate (``v1``, core API).
POD_TEMPLATE = "PodTemplate"


class CustomResource(NamedTuple):
    """A custom object's API coordinates, as ``CustomObjectsApi`` takes them (``kind`` for logs)."""

    group: str
    version: str
    plural: str
    kind: str


class Objects:
    """Creates, reads and deletes whole objects through ``core``/``custom`` (``CoreV1Api``,
    ``CustomObjectsApi`` or fakes with the same methods); see the module doc."""

    def __init__(self, core: CoreV1Api, custom: CustomObjectsApi) -> None:
        self.core = core
        self.custom = custom

    # -- pods and PodTemplates (issue 16) ------------------------------------------
    def fetch_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """The pod as stored (API JSON); API errors raised (the caller classifies them)."""
        return json_body(self.core.read_namespaced_pod(name, namespace, _preload_content=False,
                                                       _request_timeout=REQUEST_TIMEOUT))

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as stored (API JSON), or ``None`` when it is gone or cannot be read (logged)."""
        try:
            return self.fetch_pod(namespace, name)
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) != 404:
                log.warning("reading pod %s/%s failed: %s", namespace, name, exc)
            return None

    def create_pod_template(self, body: Mapping[str, Any]) -> tuple[WriteResult, str, dict[str, Any]]:
        """Create the PodTemplate ``body``; ``(created | failed, the API server's answer on failure,
        the object created)``."""
        return self._create(body, lambda ns: self.core.create_namespaced_pod_template(
            ns, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    def create_custom_object(self, resource: CustomResource,
                             body: Mapping[str, Any]) -> tuple[WriteResult, str, dict[str, Any]]:
        """Create the custom object ``body`` of ``resource``; as :meth:`create_pod_template`."""
        return self._create(body, lambda ns: self.custom.create_namespaced_custom_object(
            resource.group, resource.version, ns, resource.plural, body, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT))

    @staticmethod
    def _create(body: Mapping[str, Any], create: Callable[[str], Any]) -> tuple[WriteResult, str, dict[str, Any]]:
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        try:
            resp = create(ns)
        except Exception as exc:  # noqa: BLE001
            answer = answer_of(exc)
            log.warning("creating %s %s/%s failed: %s", body.get("kind"), ns, name, answer)
            return WriteResult.FAILED, answer, {}
        try:
            raw = json_body(resp)
        except ValueError:
            raw = {}
        return WriteResult.CREATED, "", raw if isinstance(raw, dict) else {}

    def delete_pod_template(self, namespace: str, name: str) -> WriteResult:
        """Delete PodTemplate ``namespace/name``; ``deleted``, ``gone`` (404/409) or ``failed``."""
        return self._delete(POD_TEMPLATE, namespace, name, lambda: self.core.delete_namespaced_pod_template(
            name, namespace, body=None, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    def delete_custom_object(self, resource: CustomResource, namespace: str, name: str, uid: str = "") -> WriteResult:
        """Delete the custom object ``namespace/name`` of ``resource``, with a uid precondition when
        ``uid`` is given; ``deleted``, ``gone`` (404/409: already gone, or replaced) or ``failed``."""
        body = {"preconditions": {"uid": uid}} if uid else None
        return self._delete(resource.kind, namespace, name, lambda: self.custom.delete_namespaced_custom_object(
            resource.group, resource.version, namespace, resource.plural, name, body=body, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT))

    @staticmethod
    def _delete(kind: str, namespace: str, name: str, delete: Callable[[], Any]) -> WriteResult:
        try:
            delete()
            return WriteResult.DELETED
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) in (404, 409):
                return WriteResult.GONE
            log.warning("deleting %s %s/%s failed: %s", kind, namespace, name, exc)
            return WriteResult.FAILED

    # -- PodDisruptionBudgets (opt-in) ------------------------------------------
    def ensure_pdb(self, policy: Any, body: dict[str, Any]) -> WriteResult:
        """Create the PodDisruptionBudget ``body`` (``policy``: ``PolicyV1Api``); when one of that name
        exists, set its ``minAvailable`` if cogate made it (:data:`lifecycle.MANAGED_BY_LABEL`).
        ``created``, ``updated``, ``unchanged``, ``foreign`` (not cogate's: left alone) or ``failed``."""
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        try:
            policy.create_namespaced_pod_disruption_budget(ns, body, _preload_content=False,
                                                           _request_timeout=REQUEST_TIMEOUT)
            return WriteResult.CREATED
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) != 409:
                log.warning("creating PodDisruptionBudget %s/%s failed: %s", ns, name, exc, extra=log_extra(ns, name))
                return WriteResult.FAILED
        try:
            have = json_body(policy.read_namespaced_pod_disruption_budget(name, ns, _preload_content=False,
                                                                          _request_timeout=REQUEST_TIMEOUT))
            if ((have.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) != api.COMPONENT:
                return WriteResult.FOREIGN
            if (have.get("spec") or {}).get("minAvailable") == body["spec"]["minAvailable"]:
                return WriteResult.UNCHANGED
            policy.patch_namespaced_pod_disruption_budget(
                name, ns, {"spec": {"minAvailable": body["spec"]["minAvailable"]}},
                _content_type="application/merge-patch+json", _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT)
            return WriteResult.UPDATED
        except Exception as exc:  # noqa: BLE001
            log.warning("updating PodDisruptionBudget %s/%s failed: %s", ns, name, exc, extra=log_extra(ns, name))
            return WriteResult.FAILED

    def delete_pdb(self, policy: Any, namespace: str, name: str) -> WriteResult:
        """Delete the PodDisruptionBudget cogate made for PodGroup ``namespace/name`` (only one
        labelled as cogate's); ``deleted``, ``absent``, ``foreign`` or ``failed``."""
        try:
            have = json_body(policy.read_namespaced_pod_disruption_budget(name, namespace, _preload_content=False,
                                                                          _request_timeout=REQUEST_TIMEOUT))
            if ((have.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) != api.COMPONENT:
                return WriteResult.FOREIGN
            uid = (have.get("metadata") or {}).get("uid")
            policy.delete_namespaced_pod_disruption_budget(
                name, namespace, body={"preconditions": {"uid": uid}} if uid else None,
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            return WriteResult.DELETED
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) in (404, 409):
                return WriteResult.ABSENT
            log.warning("deleting PodDisruptionBudget %s/%s failed: %s", namespace, name, exc,
                        extra=log_extra(namespace, name))
            return WriteResult.FAILED
