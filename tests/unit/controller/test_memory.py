"""One memory record per PodGroup (controller/memory.py, pure), composed of the features' records,
and the reconciler keeping it."""

from __future__ import annotations

import math

from cogate.controller.memory import GroupMemory, Memories
from cogate.controller.preemption.memory import PreemptionMemories, PreemptionMemory
from cogate.controller.provisioning.memory import ProvisioningMemories, ProvisioningMemory
from cogate.controller.release.memory import ReleaseMemories, ReleaseMemory
from cogate.controller.status.memory import StatusMemory

from tests.builders import ApiError, Harness, raw_pg, raw_pod, verdict


def test_recall_gives_one_record_per_uid_and_forget_drops_the_gone():
    memories = Memories()
    a = memories.recall("uid-a")
    assert a == GroupMemory() and a.status.progress_written == -math.inf and a.release.budget is None
    a.release.timeout_evicted.add("2024-01-01T00:00:00Z")
    assert memories.recall("uid-a") is a
    memories.recall("uid-b").release.quorum_evicted.add("t")
    assert memories.recall("uid-a").release.quorum_evicted == set(), "records share nothing"
    memories.forget({"uid-b"})
    assert len(memories) == 1 and [uid for uid, _ in memories.items()] == ["uid-b"]
    assert memories.recall("uid-a") == GroupMemory(), "a forgotten group starts blank"


def test_a_group_memory_composes_one_blank_record_per_concern():
    m = GroupMemory()
    assert (m.status, m.release, m.preemption, m.provisioning) == (
        StatusMemory(), ReleaseMemory(), PreemptionMemory(), ProvisioningMemory())
    assert m.preemption.in_flight is None and m.preemption.until == -math.inf and m.preemption.attempts == 0
    assert m.provisioning.until == -math.inf and m.provisioning.ended == ""
    other = GroupMemory()
    other.preemption.attempts += 1
    assert m.preemption.attempts == 0, "records share nothing"


def test_memories_hand_each_feature_its_own_records():
    memories = Memories()
    preemption: PreemptionMemories = memories  # the features' interfaces, as the rooms are handed them
    provisioning: ProvisioningMemories = memories
    release: ReleaseMemories = memories
    a = memories.recall("uid-a")
    assert preemption.recall_preemption("uid-a") is a.preemption
    assert provisioning.recall_provisioning("uid-a") is a.provisioning
    assert provisioning.recall_preemption("uid-b") is memories.recall("uid-b").preemption, "a blank one the first time"
    assert [(uid, r) for uid, r in preemption.iter_preemption()] == [("uid-a", a.preemption),
                                                                    ("uid-b", memories.recall("uid-b").preemption)]
    pairs = release.iter_release()
    memories.recall("uid-c")  # added while iterating: a snapshot
    assert [uid for uid, r in pairs] == ["uid-a", "uid-b"]
    assert dict(memories.iter_release())["uid-a"] is a.release


def test_the_reconciler_remembers_a_refusal_by_podgroup_uid_until_the_group_is_gone():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2)])
    h.cluster.dry_errors["b"] = [ApiError(403)] * 5
    h.run()
    refusal = h.rec.memory.recall("pg-uid-pg").release.refusal
    assert refusal is not None and refusal.attempts == 1 and refusal.whole_group
    assert refusal.until == h.now + 5.0 and refusal.uids == {"uid-b"}
    h.caches.podgroups._handle_event({"type": "DELETED", "object": h.cluster.pgs["pg"]})
    h.verdicts = []
    h.run()
    assert len(h.rec.memory) == 0
