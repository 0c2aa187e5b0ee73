"""Whole-object writes (controller/kube/objects.py): the caller names a custom object's coordinates."""

from __future__ import annotations

from cogate.controller.kube.objects import CustomResource, Objects
from cogate.controller.kube.results import WriteResult

from tests.builders import ApiError

WIDGETS = CustomResource("example.com", "v1beta1", "widgets", "Widget")


class _Custom:
    def __init__(self, errors=()):
        self.calls = []
        self.errors = list(errors)

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **_):
        self.calls.append(("create", group, version, namespace, plural, body["metadata"]["name"]))
        if self.errors:
            raise self.errors.pop(0)
        return body

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, body=None, **_):
        self.calls.append(("delete", group, version, namespace, plural, name, body))
        if self.errors:
            raise self.errors.pop(0)


def _widget(name="w"):
    return {"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"namespace": "ns", "name": name}}


def test_custom_objects_go_to_the_coordinates_the_caller_names():
    custom = _Custom()
    objects = Objects(None, custom)
    result, answer, raw = objects.create_custom_object(WIDGETS, _widget())
    assert (result, answer, raw) == (WriteResult.CREATED, "", _widget())
    assert objects.delete_custom_object(WIDGETS, "ns", "w", "uid-w") == WriteResult.DELETED
    assert custom.calls == [("create", "example.com", "v1beta1", "ns", "widgets", "w"),
                            ("delete", "example.com", "v1beta1", "ns", "widgets", "w",
                             {"preconditions": {"uid": "uid-w"}})]


def test_a_create_refused_is_failed_with_the_answer_and_a_delete_of_a_gone_object_is_gone():
    custom = _Custom([ApiError(409), ApiError(404), ApiError(500)])
    objects = Objects(None, custom)
    result, answer, raw = objects.create_custom_object(WIDGETS, _widget())
    assert result == WriteResult.FAILED and answer and raw == {}
    assert objects.delete_custom_object(WIDGETS, "ns", "w") == WriteResult.GONE
    assert objects.delete_custom_object(WIDGETS, "ns", "w") == WriteResult.FAILED
    assert custom.calls[-1][-1] is None, "no uid: no precondition"
