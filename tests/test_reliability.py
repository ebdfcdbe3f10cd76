"""Reliability multiplies: formulas, the Monte Carlo check, recovery, bad input."""

import pytest

from course.loop.reliability import (
    chain_success,
    chain_success_with_recovery,
    simulate_chain,
    step_success_with_recovery,
    success_curves,
)


def test_ten_steps_at_095_is_about_060():
    assert chain_success(0.95, 10) == pytest.approx(0.5987, abs=1e-4)


def test_monte_carlo_agrees_with_the_product():
    sim = simulate_chain(0.95, 10, trials=20_000, seed=1)
    assert abs(sim.estimate - 0.95**10) < 4 * sim.standard_error + 0.005
    assert "runs succeeded" in str(sim)


def test_recovery_raises_success_and_matches_the_formula():
    assert step_success_with_recovery(0.95, 1) == pytest.approx(0.9975)
    exact = chain_success_with_recovery(0.95, 10, retries=1)
    assert exact == pytest.approx(0.9975**10) and exact > 0.97
    sim = simulate_chain(0.95, 10, trials=20_000, retries=1, seed=2)
    assert abs(sim.estimate - exact) < 0.01


def test_curves_fall_with_steps_and_with_lower_rates():
    curves = success_curves([0.99, 0.9], max_steps=20)
    assert all(a >= b for a, b in zip(curves[0.99], curves[0.99][1:], strict=False))
    assert all(hi > lo for hi, lo in zip(curves[0.99], curves[0.9], strict=True))
    assert len(curves[0.9]) == 20


@pytest.mark.parametrize("call", [
    lambda: chain_success(1.5, 3), lambda: chain_success(0.9, -1),
    lambda: simulate_chain(0.9, 3, trials=0), lambda: chain_success_with_recovery(0.9, 3, -1),
])
def test_bad_input_is_rejected(call):
    with pytest.raises(ValueError):
        call()


def test_plot_has_one_line_per_rate_and_recovery(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from course.loop.reliability import plot_success_curves

    fig = plot_success_curves((0.95, 0.9), max_steps=12)
    assert len(fig.axes[0].lines) == 2 * 2 + 2
