"""The stopping rule (``cocoeval.run.stopping``, beyond the paper): its confidence sequence against
an independent computation of the normal-mixture martingale, the rule's decisions, and the order
instances are processed in."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from cocoeval.core.schema import Instance, conversation_of
from cocoeval.run.stopping import (
    StoppingSection,
    bounds_of,
    conversation_order,
    cs_radius,
    decide,
    processed_instances,
    rho_squared,
    rounds_of,
)

from ..sim_helpers import instance


def _mixture(x: float, t: int, var: float, rho2: float) -> float:
    """The Robbins normal-mixture martingale at S_t - t*mu = x, by numerical integration of
    exp(l*x - l^2*t*var/2) against the N(0, rho2) density of l (scipy.integrate.quad)."""
    from scipy import integrate

    def f(lam: float) -> float:
        return (
            math.exp(lam * x - lam * lam * t * var / 2)
            * math.exp(-lam * lam / (2 * rho2))
            / math.sqrt(2 * math.pi * rho2)
        )

    return integrate.quad(f, -50, 50, limit=400)[0]


@pytest.mark.parametrize(("t", "var", "alpha"), [(5, 1.0, 0.05), (40, 2.5, 0.005), (200, 0.3, 0.01)])
def test_the_radius_is_where_the_normal_mixture_martingale_reaches_one_over_alpha(t, var, alpha):
    rho2 = rho_squared(alpha, 100)
    r = cs_radius(t, var, alpha, rho2)
    assert _mixture(t * r, t, var, rho2) == pytest.approx(1 / alpha, rel=1e-6)
    assert _mixture(0.9 * t * r, t, var, rho2) < 1 / alpha < _mixture(1.1 * t * r, t, var, rho2)


def test_rho_is_tuned_so_the_unit_variance_boundary_is_tightest_at_the_planned_size():
    alpha, planned = 0.005, 80
    best = min(np.linspace(0.001, 2, 20000), key=lambda r2: cs_radius(planned, 1.0, alpha, float(r2)))
    assert rho_squared(alpha, planned) == pytest.approx(float(best), rel=0.02)


def test_bounds_are_bonferroni_sequences_around_each_behaviours_mean():
    rng = np.random.default_rng(3)
    x = rng.normal([0.5, -1.0, 0.0], 1.0, size=(30, 3))
    b = bounds_of(x.tolist(), ["a", "b", "c"], 0.06, 50)
    for j, bound in enumerate(b):
        m, var = x[:, j].mean(), x[:, j].var()
        r = cs_radius(30, var, 0.02, rho_squared(0.02, 50))
        assert (bound.mean, bound.radius, bound.low, bound.high) == pytest.approx((m, r, m - r, m + r))


def test_the_rule_says_differs_only_when_a_sequence_excludes_zero_and_precise_only_within_eps():
    sec = StoppingSection(rule="differs_or_precise", eps=0.5)
    far = bounds_of([[3.0, 0.0]] * 8 + [[3.2, 0.1]] * 8, ["a", "b"], 0.05, 16)
    assert decide(far, sec)[0] == "differs" and "a +3.10" in decide(far, sec)[1]
    near = bounds_of([[0.1, -0.1], [-0.1, 0.1]] * 200, ["a", "b"], 0.05, 400)
    assert decide(near, sec)[0] == "precise"
    assert decide(near, StoppingSection(rule="differs"))[0] is None
    assert decide([], sec) == (None, "no valid paired judgment yet")


def test_a_stopping_section_refuses_eps_with_differs_and_needs_it_with_precise():
    with pytest.raises(ValidationError, match="takes none"):
        StoppingSection(rule="differs", eps=0.3)
    with pytest.raises(ValidationError, match="needs eps"):
        StoppingSection(rule="precise")
    with pytest.raises(ValidationError):
        StoppingSection(round_conversations=0)
    with pytest.raises(ValidationError):
        StoppingSection(bogus=1)


def _inst(i: int, conv: int) -> Instance:
    return instance(f"d/M{conv}/{i}", n_hist=2, n_ref=2)


def test_rounds_hold_whole_conversations_in_a_seeded_order_that_a_larger_selection_keeps():
    insts = [_inst(i, c) for c in range(9) for i in range(3)]
    sec = StoppingSection(round_conversations=2, seed=7)
    rounds = rounds_of(insts, sec)
    assert [len({conversation_of(i) for i in r}) for r in rounds] == [2, 2, 2, 2, 1]
    assert sorted(i.id for r in rounds for i in r) == sorted(i.id for i in insts)
    order = conversation_order(insts, 7)
    assert order != sorted(order) or conversation_order(insts, 8) != order  # seeded, not the id order
    more = conversation_order([*insts, *(_inst(0, c) for c in range(9, 20))], 7)
    assert [c for c in more if c in set(order)] == order
    assert processed_instances(insts, sec, 2) == {i.id for i in rounds[0]}


def test_the_saving_forecast_says_a_separated_setup_stops_early_and_an_equal_one_runs_on():
    from cocoeval.core.taxonomy import load_taxonomy
    from cocoeval.run.stopping import forecast_saving

    insts = [instance(f"d/M{c}/{i}", n_hist=2, n_ref=30) for c in range(60) for i in range(1 + c % 3)]
    f = forecast_saving(insts, StoppingSection(round_conversations=6), load_taxonomy(), worlds=60)
    assert f.separated_share < 0.6 and f.separated_correct > 0.9
    assert f.equal_share > 0.9 and f.equal_wrong <= 0.1
    assert "assumed per-turn rates" in f.human_rates and "2×" in f.assumption
