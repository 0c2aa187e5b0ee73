"""``Room.charge`` (issue 28): the one way a pod, or room promised to one, is charged on a node."""

from __future__ import annotations

import pytest

from cogate.controller.model.records import HostPort, NodeInfo, PodInfo, Promise
from cogate.controller.planning.room import NodeTable, Room, req_with_pod

NODES = [NodeInfo("n0", allocatable={"cpu": 4000, "memory": 8 << 30, "pods": 10}),
         NodeInfo("n1", allocatable={"cpu": 2000, "pods": 3})]
POD = PodInfo("ns", "p", "uid-p", requests={"cpu": 1500, "memory": 0, "pods": 7},
              host_ports=(HostPort(8080),))


def _room(anti: bool = False) -> Room:
    return Room(NodeTable(NODES), anti, empty=False)


def _state(room: Room) -> tuple:
    return [dict(f) for f in room.free], [list(p) for p in room.ports], list(room.placed)


def test_req_with_pod_takes_one_pods_slot_and_drops_zero_requests():
    assert req_with_pod(POD.requests) == {"cpu": 1500, "pods": 1}


def test_charge_is_occupy_with_the_pods_slot_and_host_ports():
    charged, occupied = _room(anti=True), _room(anti=True)
    charged.charge(POD, 0)
    occupied.occupy(POD, req_with_pod(POD.requests), POD.host_ports, 0)
    assert _state(charged) == _state(occupied)
    assert charged.free[0] == {"cpu": 2500, "memory": 8 << 30, "pods": 9}
    assert charged.ports[0] == [HostPort(8080)] and charged.placed == [(POD, 0)]


def test_charge_of_a_promise_uses_its_requests_and_places_its_pod():
    promise = Promise(POD, "n1", {"cpu": 500}, (HostPort(9090),), "reserved")
    room = _room(anti=True)
    room.charge(promise, 1)
    assert room.free[1] == {"cpu": 1500, "pods": 2}
    assert room.ports[1] == [HostPort(9090)] and room.placed == [(POD, 1)]


def test_resources_only_charges_no_ports_nor_place_and_sign_gives_back():
    promise = Promise(POD, "n0", {"cpu": 1000}, (HostPort(9090),), "preempting")
    room = _room(anti=True)
    before = _state(room)
    mark = room.mark()
    room.charge(promise, 0, resources_only=True)
    assert room.free[0] == {"cpu": 3000, "memory": 8 << 30, "pods": 9}
    assert room.ports[0] == [] and room.placed == []
    room.charge(promise, 0, resources_only=True, sign=-1)
    assert _state(room) == before
    room.charge(POD, 0)
    room.rollback(mark)
    assert _state(room) == before


def test_giving_back_ports_and_place_is_vacate_not_charge():
    with pytest.raises(ValueError):
        _room().charge(POD, 0, sign=-1)
