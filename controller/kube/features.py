"""What a feature watches (issue 28): each feature declares its informers; the loop builds them.

As controller-runtime's builder (``ControllerManagedBy(mgr).For(...).Owns(...)``) and Kueue's
``SetupWithManager`` (``pkg/controller/admissionchecks/provisioning/controller.go``): a feature (the
core, devices, preemption, provisioning, release) is one :class:`Feature` in its own folder, saying
whether the configuration turns it on and which informers it needs (:class:`InformerSpec`: the
:class:`~cogate.controller.kube.informer.Caches` field it fills, the list/watch calls, key and
converter). ``cogate.controller.main`` loops over the features in order and builds one
:class:`~cogate.controller.kube.informer.Informer` per spec into the caches
(:func:`build_caches`); what the informers are then connected to stays with the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cogate.controller.kube.informer import Caches, Informer, ListFn, WatchFn
from cogate.controller.model.config import ReconcilerConfig


@dataclass(frozen=True)
class Apis:
    """The API clients informers list and watch through: the official client's typed APIs
    (``CoreV1Api``, ``CustomObjectsApi``, ``PolicyV1Api``, ``CoordinationV1Api``) on one
    ``ApiClient`` (``api_client``, for discovery), or fakes with the same methods."""

    core: Any
    custom: Any
    policy: Any
    coordination: Any
    api_client: Any


@dataclass(frozen=True)
class InformerSpec:
    """One informer a feature needs: the :class:`~cogate.controller.kube.informer.Caches` field it
    fills (``cache``; a tuple field, ``admission``, collects every spec naming it), its ``name``
    (thread, metrics label), its list/watch callables (``source``, e.g.
    :func:`~cogate.controller.kube.informer.pod_source`), ``key(raw) -> Hashable`` and
    ``convert(raw) -> record`` (raises ``ValueError`` on a bad object)."""

    cache: str
    name: str
    source: tuple[ListFn, WatchFn]
    key: Callable[[dict[str, Any]], Hashable]
    convert: Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Watches:
    """What a feature watches in this process: its informers, and other
    :class:`~cogate.controller.kube.informer.Caches` fields it sets (``settings``, e.g. the
    admission informers' ``admission_known``)."""

    informers: tuple[InformerSpec, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)


class FeatureUnavailable(Exception):
    """An enabled feature the API server cannot serve and the controller cannot run without (e.g.
    ``--provisioning-class`` without cluster-autoscaler's CRD): the message says why; the
    controller logs it and exits with status 2."""


@dataclass(frozen=True)
class Feature:
    """A feature's declaration: ``name``; ``enabled(config)``, whether the configuration turns it
    on (default: always); ``informers(apis, config, namespace)``, what it watches (``namespace``:
    ``--namespace``, None for all namespaces). ``informers`` may check the API server first (a
    list of one object, discovery) and raises :class:`FeatureUnavailable` when the controller
    cannot start; a feature the controller can run without logs why and watches nothing."""

    name: str
    informers: Callable[[Apis, ReconcilerConfig, str | None], Watches]
    enabled: Callable[[ReconcilerConfig], bool] = lambda config: True


def build_caches(features: Iterable[Feature], apis: Apis, config: ReconcilerConfig, namespace: str | None,
                 make: Callable[[str, tuple[ListFn, WatchFn], Callable[..., Hashable], Callable[..., Any]], Informer],
                 ) -> Caches:
    """The caches of the enabled ``features``, asked in order: one ``make(name, source, key, convert)``
    informer per spec into its field. Raises :class:`FeatureUnavailable` from a feature's ``informers``
    (no later feature is asked then)."""
    fields: dict[str, Any] = {}
    for feature in features:
        if not feature.enabled(config):
            continue
        watches = feature.informers(apis, config, namespace)
        for spec in watches.informers:
            informer = make(spec.name, spec.source, spec.key, spec.convert)
            if isinstance(getattr(Caches, spec.cache, None), tuple):
                fields[spec.cache] = (*fields.get(spec.cache, ()), informer)
            else:
                fields[spec.cache] = informer
        fields.update(watches.settings)
    return Caches(**fields)
