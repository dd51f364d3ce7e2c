"""What a woken drain reads from the last claim in turn: pg_snapshot visibility, exactly as PostgreSQL's
pg_visible_in_snapshot says for committed transactions."""

from __future__ import annotations

import pytest

from pipeline.runtime.wake_turn import nothing_left_for, seen_by, transaction_ids


@pytest.mark.parametrize(("xid", "seen"), [(99, True), (100, True), (101, False), (102, True), (103, False), (104, True), (105, False),
                                           (106, False), (107, False)])
def test_a_transaction_is_seen_before_xmin_or_before_xmax_when_not_in_progress(xid, seen):
    assert seen_by("100:105:101,103", xid) is seen


def test_nothing_is_left_only_when_the_claim_saw_no_more_and_every_ringer():
    snapshot = "100:105:101"
    assert nothing_left_for((snapshot, False), frozenset({99, 102}))
    assert not nothing_left_for((snapshot, True), frozenset({99}))  # it saw another job waiting
    assert not nothing_left_for((snapshot, False), frozenset({99, 101}))  # one ringer was in progress then
    assert not nothing_left_for((snapshot, False), frozenset({106}))  # one began after it
    assert not nothing_left_for((None, False), frozenset({99}))  # no snapshot on record
    assert not nothing_left_for((snapshot, False), None)  # a doorbell without an id
    assert not nothing_left_for(("garbage", False), frozenset({1}))


def test_doorbell_payloads_are_transaction_ids_or_nothing_can_be_told():
    assert transaction_ids({"7", "12"}) == frozenset({7, 12})
    assert transaction_ids({"7", ""}) is None and transaction_ids(None) is None and transaction_ids(set()) is None
