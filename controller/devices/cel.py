"""CEL device selectors of Dynamic Resource Allocation (pure): compile once, evaluate per device.

Source: Kubernetes ``resource.k8s.io/v1`` ``DeviceSelector.cel.expression`` and its environment
(``k8s.io/dynamic-resource-allocation/cel``): an expression sees one variable, ``device``, with

* ``device.driver`` (string): the driver that published the device (its ResourceSlice's
  ``spec.driver``);
* ``device.attributes`` (map: domain -> map: name -> value): each attribute under its domain; an
  attribute published without a domain (``model``) sits under the driver's name
  (``device.attributes["gpu.example.com"].model``); values are ``int``, ``bool``, ``string`` or a
  version (``semver``);
* ``device.capacity`` (map: domain -> map: name -> quantity), keyed the same way;
* ``device.allowMultipleAllocations`` (bool).

and the Kubernetes CEL libraries devices use: quantities (``quantity("40Gi")``, ``isQuantity``,
``compareTo``, ``isGreaterThan``, ``isLessThan``, ``asInteger``, ``asApproximateFloat``,
``isInteger``, ``sign``, ``add``, ``sub``; ``==`` between quantities compares amounts) and
semantic versions (``semver("1.2.3")``, ``isSemver``, ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``major``, ``minor``, ``patch``).

Evaluation uses cel-python (``celpy``), a maintained CEL implementation, not an interpreter of
our own. An expression that does not compile, calls a function this environment does not
provide, or does not yield a bool is *unchecked* (:class:`Selector.unchecked` names why): the
planner cannot say which devices it selects. A runtime error for one device (an attribute the
device lacks, a wrong type) makes that device not match: kube-scheduler's allocator fails such
an allocation ("CEL runtime error"), so counting the device would promise room the scheduler
does not give.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes

from cogate.controller.model.resources import parse_quantity

__all__ = ["Quantity", "Semver", "DeviceView", "Selector", "compile_selector", "activation"]


@functools.total_ordering
class Quantity:
    """A Kubernetes quantity in CEL (``k8s.io/apiserver/pkg/cel/library/quantity.go``): ``amount``
    is exact (a Fraction of the base unit: ``"1500m"`` -> 3/2)."""

    __slots__ = ("amount",)

    def __init__(self, amount: Fraction) -> None:
        self.amount = amount

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.amount == other.amount

    def __lt__(self, other: Quantity) -> bool:
        return self.amount < other.amount

    def __hash__(self) -> int:
        return hash(self.amount)

    def __repr__(self) -> str:
        return f"Quantity({self.amount})"

    @classmethod
    def parse(cls, text: Any) -> Quantity:
        """A Kubernetes quantity string (``"40Gi"``, ``"1500m"``) or number; raises ValueError
        (:func:`~cogate.controller.model.resources.parse_quantity`) when it is none."""
        return cls(parse_quantity(text if isinstance(text, (int, float)) and not isinstance(text, bool) else str(text)))


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


@functools.total_ordering
class Semver:
    """A semantic version in CEL (``k8s.io/apiserver/pkg/cel/library/semverlib.go``, semver 2.0.0:
    build metadata ignored, a pre-release sorts before its release)."""

    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, text: str) -> None:
        m = _SEMVER.match(text)
        if m is None:
            raise ValueError(f"invalid semver {text!r}")
        self.major, self.minor, self.patch = int(m.group(1)), int(m.group(2)), int(m.group(3))
        self.pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else ()

    def _key(self) -> tuple[Any, ...]:
        # semver 2.0.0 precedence: no pre-release > any pre-release; numeric < alphanumeric identifiers
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key()

    def __lt__(self, other: Semver) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Semver({self.major}.{self.minor}.{self.patch})"


def _is_quantity(s: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(s))
    except (ValueError, ArithmeticError):
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _is_semver(s: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_SEMVER.match(str(s)) is not None)


def _same(a: Any, b: Any) -> None:
    if type(a) is not type(b) or not isinstance(a, (Quantity, Semver)):
        raise TypeError(f"no such overload: {type(a).__name__}.compareTo({type(b).__name__})")


def _compare(a: Any, b: Any) -> celtypes.IntType:
    _same(a, b)
    return celtypes.IntType(-1 if a < b else (1 if b < a else 0))


def _greater(a: Any, b: Any) -> celtypes.BoolType:
    _same(a, b)
    return celtypes.BoolType(b < a)


def _less(a: Any, b: Any) -> celtypes.BoolType:
    _same(a, b)
    return celtypes.BoolType(a < b)


def _q(a: Any) -> Quantity:
    if not isinstance(a, Quantity):
        raise TypeError(f"no such overload for {type(a).__name__}")
    return a


def _as_integer(a: Any) -> celtypes.IntType:
    q = _q(a).amount
    if q.denominator != 1 or not -(1 << 63) <= q.numerator < (1 << 63):
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(q.numerator)


def _plus(a: Any, b: Any, sign: int) -> Quantity:
    other = b.amount if isinstance(b, Quantity) else Fraction(int(b))
    return Quantity(_q(a).amount + sign * other)


def _version_part(name: str) -> Any:
    def part(a: Any) -> celtypes.IntType:
        if not isinstance(a, Semver):
            raise TypeError(f"no such overload: {type(a).__name__}.{name}()")
        return celtypes.IntType(getattr(a, name))
    return part


#: The functions of the device environment beyond CEL's standard ones (method calls pass the
#: receiver first: ``a.compareTo(b)`` -> ``compareTo(a, b)``).
_FUNCTIONS = {
    "quantity": Quantity.parse,
    "isQuantity": _is_quantity,
    "semver": lambda s: Semver(str(s)),
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": _greater,
    "isLessThan": _less,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: celtypes.DoubleType(float(_q(a).amount)),
    "isInteger": lambda a: celtypes.BoolType(_q(a).amount.denominator == 1),
    "sign": lambda a: celtypes.IntType((_q(a).amount > 0) - (_q(a).amount < 0)),
    "add": lambda a, b: _plus(a, b, 1),
    "sub": lambda a, b: _plus(a, b, -1),
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
}

#: Identifiers of CEL's standard library that celpy provides (``celpy.evaluation.base_functions``)
#: plus the macros its parser expands; a call to anything else is unchecked.
_KNOWN = frozenset(_FUNCTIONS) | frozenset(celpy.evaluation.base_functions) | frozenset(
    {"has", "all", "exists", "exists_one", "map", "filter", "in"})

_CALL = re.compile(r"\.?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


@dataclass(frozen=True)
class DeviceView:
    """One device as a selector sees it. ``attributes`` / ``capacity``: domain -> name -> value
    (attribute values: int, bool, str or :class:`Semver`; capacity: :class:`Quantity`)."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


def _cel(v: Any) -> Any:
    if isinstance(v, (Quantity, Semver)):
        return v
    if isinstance(v, bool):
        return celtypes.BoolType(v)
    if isinstance(v, int):
        return celtypes.IntType(v)
    if isinstance(v, str):
        return celtypes.StringType(v)
    if isinstance(v, Mapping):
        return celtypes.MapType({celtypes.StringType(k): _cel(x) for k, x in v.items()})
    raise TypeError(f"unsupported attribute value {v!r}")


def activation(device: DeviceView) -> dict[str, Any]:
    """The CEL activation (``{"device": ...}``) of ``device``."""
    return {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(device.driver),
        celtypes.StringType("attributes"): _cel(device.attributes),
        celtypes.StringType("capacity"): _cel(device.capacity),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(device.allow_multiple_allocations),
    })}


@dataclass(frozen=True)
class Selector:
    """A compiled selector. ``unchecked``: why the planner cannot evaluate it ('' when it can)."""

    expression: str
    unchecked: str = ""
    _program: Any = field(default=None, compare=False, repr=False)

    def matches(self, device: DeviceView) -> bool:
        """True when the expression yields true for ``device``; False when it yields false or fails
        at run time for it (a missing attribute, a wrong type). Raises ValueError when the
        selector is unchecked (callers test :attr:`unchecked` first)."""
        if self.unchecked:
            raise ValueError(f"selector {self.expression!r} is unchecked: {self.unchecked}")
        try:
            out = self._program.evaluate(activation(device))
        except Exception:  # noqa: BLE001 - any failure for this device (celpy's own errors included): no match
            return False
        if isinstance(out, celpy.CELEvalError):
            return False
        return isinstance(out, celtypes.BoolType) and bool(out)


_ENV = celpy.Environment()


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """Compile a ``DeviceSelector.cel.expression`` (cached: one compilation per distinct text).
    Never raises: a parse error or a function outside this environment makes the selector
    :attr:`Selector.unchecked`, naming it."""
    text = expression if isinstance(expression, str) else ""
    if not text.strip():
        return Selector(expression, "empty expression")
    bare = _STRING.sub('""', text)
    unknown = sorted({m.group(1) for m in _CALL.finditer(bare)} - _KNOWN)
    if unknown:
        return Selector(expression, f"CEL function{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} not modelled")
    try:
        ast = _ENV.compile(text)
        program = _ENV.program(ast, functions=_FUNCTIONS)
    except Exception as e:  # noqa: BLE001 - celpy raises its own parse errors; the text is user input
        return Selector(expression, f"CEL does not compile: {str(e).splitlines()[0][:120]}")
    return Selector(expression, "", program)
