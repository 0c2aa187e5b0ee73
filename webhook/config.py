"""The MutatingWebhookConfiguration cogate registers, as a plain dict.

One place for the registration rules of docs/semantics.md (the chart template
``charts/cogate/templates/webhook.yaml`` renders the same rules and
``tests/unit/test_chart.py`` checks they agree):

- only pod CREATE (``rules``), only pods carrying the pod-group label
  (``objectSelector``: key exists), never in ``kube-system`` or cogate's own
  namespace (``namespaceSelector`` on ``kubernetes.io/metadata.name``);
- ``failurePolicy: Fail`` — a labelled pod must never skip the gate;
- ``sideEffects: None`` (the webhook makes no API calls), ``timeoutSeconds: 5``.
"""

from __future__ import annotations

from typing import Any

from cogate.api import POD_GROUP_LABEL

WEBHOOK_NAME = "pod-group-gate.scheduling.x-k8s.io"
CONFIGURATION_NAME = "cogate"


def webhook_configuration(
    client_config: dict[str, Any],
    *,
    name: str = CONFIGURATION_NAME,
    excluded_namespaces: tuple[str, ...] = ("kube-system",),
    timeout_seconds: int = 5,
) -> dict[str, Any]:
    """Build the ``admissionregistration.k8s.io/v1`` MutatingWebhookConfiguration.

    ``client_config`` is the webhook's ``clientConfig``: ``{"url": ..., "caBundle": b64}``
    for a webhook outside the cluster, or ``{"service": {...}, "caBundle": b64}``.
    ``timeout_seconds`` must be 1..30 (API validation); raises ``ValueError`` otherwise.
    """
    if not 1 <= timeout_seconds <= 30:
        raise ValueError(f"timeoutSeconds must be between 1 and 30, got {timeout_seconds}")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "cogate"}},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "clientConfig": client_config,
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "objectSelector": {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]},
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(excluded_namespaces)}
                    ]
                },
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": timeout_seconds,
                "reinvocationPolicy": "Never",
            }
        ],
    }
