"""Readers of API JSON fields: the one place for "absent reads as the default, another type is an
error naming the field" (after kopf ``kopf/_cogs/structs/dicts.py`` ``resolve(d, path, default)``).

Every reader takes the value, the field's path (for the message: ``"spec.containers[0].ports"``)
and, where one applies, the default: ``reader(value, path[, default])``. ``None`` (the field is
absent or null) reads as the default; a value of another JSON type raises :class:`InvalidObject`
``"<path>: expected <what>, got <what came>"``. The informers drop an object whose reader raised
(:mod:`cogate.controller.kube.informer`); callers prefix the object's name
(``"pod ns/name: spec.priority: ..."``).

Not here, on purpose: quantities (:mod:`cogate.controller.model.resources` raises ``QuantityError``,
which ``effective_request`` promises its callers), AdmissionReviews (the webhook raises
``InvalidReview``: a 400, not a dropped object), and the readers that never raise because a bad
field there means "not ours" rather than "invalid" (scheduler-plugins leftovers, strays, the
admission configurations the guard reads, Lease records).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping
from typing import Any, overload

from cogate.models import parse_time as rfc3339_to_epoch

__all__ = ["InvalidObject", "mapping", "sections", "array", "mappings", "text", "texts", "string_map", "integer", "boolean", "parse_time"]

class InvalidObject(ValueError):
    """An API object the planner cannot read; the message names the field.
    (Also importable as ``cogate.controller.model.records.InvalidObject``.)"""


def mapping(v: Any, path: str) -> Mapping[str, Any]:
    """An object field: ``{}`` when absent or null."""
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise InvalidObject(f"{path}: expected an object, got {type(v).__name__}")
    return v


def sections(o: Any, kind: str) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    """``(metadata, spec, status)`` of an API object of ``kind`` (each ``{}`` when absent);
    :class:`InvalidObject` naming ``kind`` when ``o`` is not an object, or the section when one
    of them is not."""
    if not isinstance(o, Mapping):
        raise InvalidObject(f"{kind}: expected an object, got {type(o).__name__}")
    return mapping(o.get("metadata"), "metadata"), mapping(o.get("spec"), "spec"), mapping(o.get("status"), "status")


def array(v: Any, path: str) -> list[Any]:
    """A list field: ``[]`` when absent or null (entries unchecked: :func:`mappings`, :func:`texts`)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise InvalidObject(f"{path}: expected a list, got {type(v).__name__}")
    return v


def mappings(v: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(path[i], object)`` for each entry of the list field ``v`` (none when absent or null);
    a null entry reads as ``{}``, any other non-object entry raises naming ``path[i]``."""
    for i, item in enumerate(array(v, path)):
        yield f"{path}[{i}]", mapping(item, f"{path}[{i}]")


def text(v: Any, path: str, default: str = "") -> str:
    """A string field: ``default`` when absent or null."""
    if v is None:
        return default
    if not isinstance(v, str):
        raise InvalidObject(f"{path}: expected a string, got {type(v).__name__}")
    return v


def texts(v: Any, path: str) -> tuple[str, ...]:
    """A list-of-strings field (``values``, ``namespaces``): ``()`` when absent or null; a null
    entry reads as ``""``."""
    return tuple(text(x, f"{path}[{i}]") for i, x in enumerate(array(v, path)))


def string_map(v: Any, path: str) -> Mapping[str, str]:
    """A string-to-string object field (``labels``, ``nodeSelector``, ``matchLabels``): ``{}`` when
    absent or null; a key or value not a string raises naming ``path.key``."""
    m = mapping(v, path)
    for k, val in m.items():
        if not isinstance(k, str) or not isinstance(val, str):
            raise InvalidObject(f"{path}.{k}: expected a string value")
    return m


@overload
def integer(v: Any, path: str, default: int = 0, *, minimum: int | None = None) -> int: ...
@overload
def integer(v: Any, path: str, default: None, *, minimum: int | None = None) -> int | None: ...


def integer(v: Any, path: str, default: int | None = 0, *, minimum: int | None = None) -> int | None:
    """A whole-number field (JSON booleans are not numbers): ``default`` when absent or null (pass
    ``None`` to tell absence apart). ``minimum``: the least value accepted (0: non-negative)."""
    if v is None:
        return default
    if not isinstance(v, int) or isinstance(v, bool) or (minimum is not None and v < minimum):
        what = ("an integer" if minimum is None else "a non-negative integer" if minimum == 0
                else f"an integer of at least {minimum}")
        raise InvalidObject(f"{path}: expected {what}, got {v!r}")
    return v


def boolean(v: Any, path: str, default: bool = False) -> bool:
    """A boolean field: ``default`` when absent or null."""
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InvalidObject(f"{path}: expected a boolean, got {type(v).__name__}")
    return v


def parse_time(value: Any, field_name: str = "timestamp") -> float:
    """A timestamp field of an API object -> epoch seconds; None/'' -> 0.0; epoch numbers and
    datetimes pass through. Text is parsed by :func:`cogate.models.parse_time` (RFC 3339).
    Raises InvalidObject naming ``field_name``."""
    if value in (None, ""):
        return 0.0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, _dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)).timestamp()
    try:
        return rfc3339_to_epoch(value)
    except ValueError:
        raise InvalidObject(f"{field_name}: invalid timestamp {value!r}") from None
