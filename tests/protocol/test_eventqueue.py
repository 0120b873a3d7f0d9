"""The one event queue: due items in time order, ties in push order, pushes while draining."""

from __future__ import annotations

from protocol.eventqueue import EventQueue


def test_due_items_come_in_time_order_and_ties_in_push_order() -> None:
    q: EventQueue[str] = EventQueue()
    assert q.next_at() is None and not q and len(q) == 0
    for at, item in ((2.0, "c"), (1.0, "a"), (1.0, "b"), (3.0, "d")):
        q.push(at, item)
    assert q.next_at() == 1.0 and len(q) == 4
    assert list(q.due(2.0)) == ["a", "b", "c"]
    assert q.next_at() == 3.0 and list(q.due(2.9)) == []


def test_an_item_pushed_while_draining_comes_out_if_due() -> None:
    q: EventQueue[int] = EventQueue()
    q.push(1.0, 1)
    seen = []
    for item in q.due(5.0):
        seen.append(item)
        if item < 3:
            q.push(1.0 + item, item + 1)
    q.push(9.0, 99)
    assert seen == [1, 2, 3] and list(q.due(8.0)) == [] and q.next_at() == 9.0
