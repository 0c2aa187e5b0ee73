"""Smoke test of the cluster benchmarks (bench/, issue 10): benchmarks 3 (end to end) and 4
(release throughput) in --quick mode on their own local control plane, and the autoscaler side by
side (issue 16 item 6) on the session's autoscaled cluster. Checks only that each
returns a well-formed RESULT (the contract in bench/: name, title, what, baseline, tables,
plots, targets, notes), never a timing.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.builders.bench import bench_module


@pytest.fixture(scope="module")
def own_cluster():
    # Not the session cluster: the benchmarks replace every kwok node and register their own webhook.
    with _module("clusterbench").control_plane() as c:
        yield c


def _module(name: str):
    return bench_module(name)


def _check_result(res: dict, name: str) -> None:
    assert res["name"] == name
    for key in ("title", "what", "baseline"):
        assert isinstance(res[key], str) and res[key].strip(), key
    json.dumps(res, allow_nan=False)  # JSON-serialisable, no NaN
    assert res["tables"], "at least one table"
    for t in res["tables"]:
        assert t["caption"] and t["columns"] and t["rows"]
        for row in t["rows"]:
            assert len(row) == len(t["columns"]), (t["caption"], row)
            for v in row:
                assert v is None or isinstance(v, (str, int, float)), v
                assert not (isinstance(v, float) and math.isnan(v))
    assert isinstance(res["plots"], list) and isinstance(res["notes"], list)
    assert res["targets"]
    for tg in res["targets"]:
        assert set(tg) == {"what", "target", "measured", "met", "explanation"}
        assert isinstance(tg["met"], bool) or (tg["met"] is None and tg["target"].startswith("none"))
        assert tg["met"] is not False or tg["explanation"], "a missed target is explained"


@pytest.mark.parametrize("module,name", [("bench_end_to_end", "end_to_end"),
                                         ("bench_release_throughput", "release_throughput")])
def test_quick_result_is_well_formed(own_cluster, tmp_path, module, name):
    res = _module(module).run(True, tmp_path, cluster=own_cluster)
    _check_result(res, name)


def test_autoscaler_quick_result_is_well_formed(autoscaled_cluster, tmp_path):
    """The autoscaler side by side (issue 16 item 6) in --quick mode on the session's autoscaled
    cluster (its single group is the quick spec's): a well-formed RESULT with its plot, and the
    rows of both systems for both workloads."""
    mod = _module("bench_autoscaler_cluster")
    res = mod.run(True, tmp_path, cluster=autoscaled_cluster)
    _check_result(res, "autoscaler_cluster")
    assert (tmp_path / res["plots"][0]["file"]).is_file()
    fit, unfit = res["tables"][0], res["tables"][3]
    assert sorted(r[2] for r in fit["rows"]) == ["autoscaler alone", "cogate"]
    assert sorted(r[1] for r in unfit["rows"]) == ["autoscaler alone", "cogate"]
