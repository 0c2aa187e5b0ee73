"""The one way to call the API (cogate/kube.py): status, body, the transient rule, backoff, retrying."""

from __future__ import annotations

import json

import pytest

from cogate import kube
from cogate.kube import Backoff, api_status, is_transient, json_body, retrying


class ApiError(Exception):
    def __init__(self, status: int | None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class Resp:
    def __init__(self, data: bytes | str) -> None:
        self.data = data


def test_backoff_is_capped_and_jittered():
    values = iter([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    b = Backoff(initial=1.0, maximum=4.0, jitter=0.2, rand=lambda: next(values))
    got = [b.next() for _ in range(6)]
    assert got == pytest.approx([0.8, 2.0 * 1.2, 4.0 * 0.8, 4.0 * 0.8, 4.0 * 0.8, 4.0 * 0.8])


@pytest.mark.parametrize("exc,status,transient", [
    (ApiError(404), 404, False),
    (ApiError(409), 409, False),
    (ApiError(422), 422, False),
    (ApiError(429), 429, True),
    (ApiError(500), 500, True),
    (ApiError(503), 503, True),
    (ApiError(None), None, True),
    (ConnectionResetError("reset"), None, True),
    (TimeoutError(), None, True),
])
def test_status_and_transient_rule(exc, status, transient):
    assert api_status(exc) == status
    assert is_transient(exc) is transient


def test_status_that_is_not_an_int_is_no_status():
    e = ApiError(404)
    e.status = "404"  # type: ignore[assignment]
    assert api_status(e) is None


@pytest.mark.parametrize("resp,expected", [
    ({"a": 1}, {"a": 1}),
    (Resp(b'{"kind": "Pod"}'), {"kind": "Pod"}),
    (Resp('{"kind": "Pod"}'), {"kind": "Pod"}),
    (Resp(b""), {}),
    (None, {}),
])
def test_json_body(resp, expected):
    assert json_body(resp) == expected


@pytest.mark.parametrize("data", [b"[1, 2]", b"not json", b'"text"'])
def test_json_body_rejects_what_is_not_an_object(data):
    with pytest.raises(ValueError):
        json_body(Resp(data))


def script(*results):
    """``fn`` returning/raising the scripted results in order; ``calls`` counts calls."""
    it = iter(results)

    def fn():
        fn.calls += 1
        r = next(it)
        if isinstance(r, BaseException):
            raise r
        return r

    fn.calls = 0
    return fn


def test_retrying_backs_off_on_transient_errors_only():
    sleeps: list[float] = []
    fn = script(ApiError(503), ApiError(None), ApiError(429), "ok")
    got = retrying(fn, attempts=4, backoff=Backoff(initial=1.0, maximum=8.0, jitter=0.0), sleep=sleeps.append)
    assert got == "ok" and fn.calls == 4
    assert sleeps == [1.0, 2.0, 4.0]


@pytest.mark.parametrize("status", [400, 403, 404, 409, 422])
def test_retrying_raises_other_errors_at_once(status):
    fn = script(ApiError(status), "ok")
    with pytest.raises(ApiError) as err:
        retrying(fn, attempts=5, backoff=Backoff(), sleep=lambda s: pytest.fail("slept"))
    assert err.value.status == status and fn.calls == 1


def test_retrying_applies_the_callers_rule_without_sleeping():
    fn = script(ApiError(409), ApiError(422), json.dumps({}))
    got = retrying(fn, attempts=3, backoff=Backoff(), again=lambda e: api_status(e) in (409, 422),
                   sleep=lambda s: pytest.fail("slept"))
    assert got == "{}" and fn.calls == 3


def test_retrying_raises_the_last_attempts_error():
    fn = script(ApiError(500), ApiError(500), ApiError(502))
    with pytest.raises(ApiError) as err:
        retrying(fn, attempts=3, backoff=Backoff(jitter=0.0), sleep=lambda s: None)
    assert err.value.status == 502 and fn.calls == 3


def test_retrying_without_backoff_retries_only_the_callers_rule():
    fn = script(ApiError(503), "ok")
    with pytest.raises(ApiError):
        retrying(fn, attempts=3, again=lambda e: api_status(e) == 409)
    assert fn.calls == 1


def test_retrying_needs_an_attempt():
    with pytest.raises(ValueError, match="attempts"):
        retrying(lambda: None, attempts=0)


def test_missing_kubeconfig_names_the_file_and_where_it_came_from(tmp_path, monkeypatch):
    real = tmp_path / "config"
    real.write_text("apiVersion: v1\nkind: Config\n")
    gone = tmp_path / "gone"
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert kube.missing_kubeconfig(None) == ""                        # in-cluster next: nothing to name
    assert kube.missing_kubeconfig(None, default=str(gone)) == f"kubeconfig {gone} (the default) does not exist"
    assert kube.missing_kubeconfig(str(gone)) == f"kubeconfig {gone} (--kubeconfig) does not exist"
    assert kube.missing_kubeconfig(str(real)) == ""
    monkeypatch.setenv("KUBECONFIG", f"{gone}:{tmp_path / 'also-gone'}")
    assert kube.missing_kubeconfig(None) == f"kubeconfig {gone}, {tmp_path / 'also-gone'} ($KUBECONFIG) does not exist"
    monkeypatch.setenv("KUBECONFIG", f"{gone}:{real}")               # kubectl reads the files that exist
    assert kube.missing_kubeconfig(None) == ""
    with pytest.raises(Exception, match=f"kubeconfig {gone},"):      # the controller's and ungate's client
        monkeypatch.setenv("KUBECONFIG", f"{gone}:{tmp_path / 'x'}")
        kube.api_client(None)
