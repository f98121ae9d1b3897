"""The local provider's prompt bookkeeping, without the model: how a prompt is cut into batches
and which saved prompt state serves a new prompt (``cocoeval.llm.providers.local``)."""

from __future__ import annotations

import numpy as np
import pytest

from cocoeval.llm.providers.local import PromptStates, chunks, common_prefix


@pytest.mark.parametrize("size", [3, 4, 7, 512])
def test_a_prompt_is_cut_into_batches_of_two_or_more_tokens(size):
    assert chunks(0, size) == []
    for n in range(1, 3 * size + 3):
        pieces = chunks(n, size)
        assert [a for a, _ in pieces] == [0, *[b for _, b in pieces[:-1]]]  # contiguous, from 0
        assert pieces[-1][1] == n
        assert all(0 < b - a <= size for a, b in pieces)
        if n > 1:
            assert all(b - a >= 2 for a, b in pieces), (n, size, pieces)
    assert chunks(1, 512) == [(0, 1)]  # a one-token prompt has no other way
    assert chunks(513, 512) == [(0, 511), (511, 513)]
    assert chunks(1024, 512) == [(0, 512), (512, 1024)]


def test_common_prefix():
    a = np.array([1, 2, 3, 4], dtype=np.intc)
    assert common_prefix(a, np.array([1, 2, 9], dtype=np.intc)) == 2
    assert common_prefix(a, a[:3]) == 3
    assert common_prefix(a, np.array([7], dtype=np.intc)) == 0
    assert common_prefix(a, np.array([], dtype=np.intc)) == 0


class _St:
    def __init__(self, size: int) -> None:
        self.llama_state_size = size


def _t(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.intc)


def test_the_state_sharing_the_longest_prefix_serves_a_prompt():
    s = PromptStates(1 << 20)
    a, b = _St(10), _St(10)
    s.put(_t(1, 2, 3), a)
    s.put(_t(1, 5, 6, 7), b)
    assert s.longest(_t(1, 2, 3, 4)) == (3, a)
    assert s.longest(_t(1, 5, 6, 9)) == (3, b)
    assert s.longest(_t(1, 2, 9)) == (2, a)
    assert s.longest(_t(8, 8)) == (0, None)
    assert s.covers(_t(1, 5)) and s.covers(_t(1, 2, 3)) and not s.covers(_t(1, 2, 3, 4))


def test_a_longer_prompt_replaces_the_states_it_extends():
    s = PromptStates(1 << 20)
    s.put(_t(1, 2), _St(10))
    s.put(_t(1, 2, 3), _St(20))
    longer = _St(30)
    s.put(_t(1, 2, 3, 4), longer)
    assert len(s) == 1 and s.longest(_t(1, 2, 9)) == (2, longer)
    assert s._bytes == 30


def test_the_least_recently_used_states_go_past_the_capacity():
    s = PromptStates(25)
    first, second = _St(10), _St(10)
    s.put(_t(1), first)
    s.put(_t(2), second)
    s.longest(_t(1, 0))  # first used again: second is now the oldest
    s.put(_t(3), _St(10))
    assert s.longest(_t(2, 0)) == (0, None) and s.longest(_t(1, 0)) == (1, first)
    assert s._bytes == 20
    s.put(_t(4), _St(100))  # one state over the capacity is still kept (the newest)
    assert len(s) == 1 and s._bytes == 100


class _Fake:
    def set_threads(self, batch: int) -> None:
        self.batch = batch


def test_contexts_are_made_on_demand_up_to_the_limit_and_a_failed_making_frees_its_place():
    from cocoeval.llm.providers.local import _Contexts

    fails = [True]

    def make():
        if fails.pop() if fails else False:
            raise RuntimeError("model file unreadable")
        return _Fake()

    pool = _Contexts(make, limit=2, states=PromptStates(0), cores=2)
    with pytest.raises(RuntimeError), pool.context():
        pass
    assert pool.made == 0 and pool.free == []
    with pool.context() as a:
        assert a.batch == 2 and a.states is pool.states  # alone: every core for its prompts
        with pool.context() as b:
            assert b is not a and b.batch == 1 and pool.made == 2  # two in flight: a core each
    assert pool.made == 2 and len(pool.free) == 2
    with pool.context() as c:
        assert c in (a, b) and pool.made == 2  # a free context is used again, none made
