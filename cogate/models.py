"""Pydantic v2 models of the PodGroup API object (``scheduling.x-k8s.io/v1alpha1``).

Field names are the API's (camelCase); the models only read and write the JSON the
API server speaks, with the same defaults and bounds as the CRD
(``charts/cogate/crds/scheduling.x-k8s.io_podgroups.yaml``):

- ``spec.minMember``: int32, >= 1, default 1 (the CRD defaults it too);
- ``spec.minResources``: ResourceList, name -> quantity (``"4"``, ``"8Gi"``, ``2``);
  values are kept as given (parse with ``cogate.controller.model.resources.parse_quantity``);
- ``spec.scheduleTimeoutSeconds``: seconds, 0 to 2147483647; the time a released group may go
  without progress (from the release or the last member bound, whichever is later) before it times
  out (docs/semantics.md);
- ``status``: scheduler-plugins' fields (``phase``, ``running``, ``succeeded``,
  ``failed``, ``scheduleStartTime``, ``occupiedBy``) plus ``scheduled`` and
  ``conditions`` (metav1.Condition).

Times are kept as RFC 3339 strings exactly as the API returns them (``...Z``), so a
round trip never changes an unchanged status; :func:`parse_time` / :func:`format_time`
convert to and from float epoch seconds (UTC, second precision as metav1.Time).

Unknown fields are ignored when reading (a newer CRD may add some) and never written.
Bad input raises ``pydantic.ValidationError`` whose errors name the field
(e.g. ``spec.minMember``).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cogate import api

__all__ = [
    "PHASES",
    "Condition",
    "ObjectMeta",
    "PodGroupSpec",
    "PodGroupStatus",
    "PodGroup",
    "parse_time",
    "format_time",
]

#: Phases in their order of progress (scheduler-plugins' names).
PHASES = ("Pending", "Scheduling", "Scheduled", "Running", "Finished", "Failed")

INT32_MAX = 2**31 - 1
#: Kubernetes quantity syntax, as in the CRD (resource.Quantity's regular expression).
QUANTITY_RE = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
#: metav1.Condition reason syntax.
REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(value: str) -> float:
    """RFC 3339 text (``2024-05-01T10:00:00Z``) -> float epoch seconds (UTC).

    Raises ``ValueError`` naming the bad text.
    """
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError(f"not an RFC 3339 time: {value!r}")
    text = value.replace("z", "Z").replace("Z", "+00:00").replace("t", "T")
    return _dt.datetime.fromisoformat(text).timestamp()


def format_time(epoch: float) -> str:
    """Float epoch seconds -> RFC 3339 UTC with second precision (metav1.Time's encoding)."""
    return _dt.datetime.fromtimestamp(int(epoch), tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_time(value: str | None) -> str | None:
    if value is not None:
        parse_time(value)
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    def to_api(self) -> dict[str, Any]:
        """API JSON of this object: camelCase names, ``None`` fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Condition(_Model):
    """metav1.Condition. ``lastTransitionTime`` is RFC 3339 text."""

    type: str = Field(min_length=1, max_length=316)
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(min_length=1, max_length=1024, pattern=REASON_RE.pattern)
    message: str = Field(default="", max_length=32768)
    lastTransitionTime: str
    observedGeneration: int | None = Field(default=None, ge=0)

    _t = field_validator("lastTransitionTime")(_check_time)


class ObjectMeta(_Model):
    """The part of metav1.ObjectMeta cogate reads."""

    name: str = Field(min_length=1)
    namespace: str = ""
    uid: str | None = None
    creationTimestamp: str | None = None
    resourceVersion: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    _t = field_validator("creationTimestamp")(_check_time)


class PodGroupSpec(_Model):
    """Spec: ``minMember`` (1..int32), ``minResources`` (ResourceList), ``scheduleTimeoutSeconds`` (0..int32)."""

    minMember: int = Field(default=1, ge=1, le=INT32_MAX, strict=True)
    minResources: dict[str, str | int] | None = None
    scheduleTimeoutSeconds: int | None = Field(default=None, ge=0, le=INT32_MAX, strict=True)

    @field_validator("minResources", mode="before")
    @classmethod
    def _quantities(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name, q in value.items():
                if isinstance(q, bool) or not isinstance(q, (str, int)) or (isinstance(q, str) and not QUANTITY_RE.match(q)):
                    raise ValueError(f"{name}: {q!r} is not a Kubernetes quantity")
        return value


class PodGroupStatus(_Model):
    """Status. Counts are members; ``scheduleStartTime`` is the release time (RFC 3339)."""

    phase: Literal[PHASES] | None = None  # type: ignore[valid-type]  # one list: PHASES
    scheduled: int | None = Field(default=None, ge=0)
    running: int | None = Field(default=None, ge=0)
    succeeded: int | None = Field(default=None, ge=0)
    failed: int | None = Field(default=None, ge=0)
    scheduleStartTime: str | None = None
    occupiedBy: str | None = None
    conditions: list[Condition] = Field(default_factory=list)

    _t = field_validator("scheduleStartTime")(_check_time)

    def condition(self, type_: str) -> Condition | None:
        """The condition of ``type_``, or ``None``."""
        return next((c for c in self.conditions if c.type == type_), None)

    def to_api(self) -> dict[str, Any]:
        out = super().to_api()
        if not out.get("conditions"):
            out.pop("conditions", None)
        return out


class PodGroup(_Model):
    """A PodGroup object: ``metadata``, ``spec``, ``status``."""

    apiVersion: str = api.API_VERSION
    kind: str = api.KIND
    metadata: ObjectMeta
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def key(self) -> tuple[str, str]:
        """``(namespace, name)``."""
        return (self.metadata.namespace, self.metadata.name)

    def to_api(self) -> dict[str, Any]:
        out = super().to_api()
        out["status"] = self.status.to_api()
        return out

    @classmethod
    def from_api(cls, obj: dict[str, Any]) -> "PodGroup":
        """Build from API JSON (a watch event's object or a GET response).

        ``spec``/``status`` may be absent or ``null``. Raises ``pydantic.ValidationError``
        naming the field (e.g. ``spec.minMember``) on bad input, including a non-dict
        ``obj`` or a wrong apiVersion/kind.
        """
        if isinstance(obj, dict):
            obj = {k: v for k, v in obj.items() if not (k in ("spec", "status") and v is None)}
        return cls.model_validate(obj)

    @field_validator("apiVersion")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if value != api.API_VERSION:
            raise ValueError(f"expected {api.API_VERSION}, got {value!r}")
        return value

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value != api.KIND:
            raise ValueError(f"expected {api.KIND}, got {value!r}")
        return value
