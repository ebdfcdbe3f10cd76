"""Reliability multiplies: the chance that every step of an agent's run succeeds.

If each of ``n`` steps succeeds with probability ``p`` *given that the earlier steps succeeded*
and nothing repairs a failure, the run succeeds with probability ``p ** n`` (0.95 ** 10 ~= 0.60).
That product is exact only under this conditional assumption; per-step success rates measured
without conditioning do not determine it when outcomes are dependent.

Recovery (a retry of a failed step, which succeeds with ``p_retry``) raises each step's success
to ``1 - (1 - p) * (1 - p_retry) ** retries``, and the run's to that to the power ``n``.

:func:`simulate_chain` checks both formulas by Monte Carlo over scripted step outcomes (each
step's outcome is a coin with probability ``p``). What this module does not model: correlated
failures, retries that cost budget, or a verifier that misses errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from course.records import Record

__all__ = ["Simulation", "chain_success", "chain_success_with_recovery", "plot_success_curves", "simulate_chain", "step_success_with_recovery", "success_curves"]


def _check(p: float, n: int, retries: int = 0) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a success rate must be between 0 and 1, got {p!r}.")
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"the number of steps must be an integer >= 0, got {n!r}.")
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}.")


def chain_success(p: float, n: int) -> float:
    """P(all ``n`` steps succeed) with per-step success ``p`` and no recovery: ``p ** n``."""
    _check(p, n)
    return p**n


def step_success_with_recovery(p: float, retries: int = 1, p_retry: float | None = None) -> float:
    """Success of one step that may be retried ``retries`` times after a failure."""
    p_retry = p if p_retry is None else p_retry
    _check(p, 0, retries)
    _check(p_retry, 0)
    return 1.0 - (1.0 - p) * (1.0 - p_retry) ** retries


def chain_success_with_recovery(p: float, n: int, retries: int = 1,
                                p_retry: float | None = None) -> float:
    """P(all ``n`` steps succeed) when each failed step is retried up to ``retries`` times."""
    _check(p, n, retries)
    return step_success_with_recovery(p, retries, p_retry) ** n


@dataclass(frozen=True)
class Simulation(Record):
    """A Monte Carlo estimate of a run's success rate (displayed: text, and its values as JSON)."""

    p: float
    n: int
    retries: int
    trials: int
    successes: int

    @property
    def estimate(self) -> float:
        return self.successes / self.trials

    @property
    def standard_error(self) -> float:
        q = self.estimate
        return (q * (1 - q) / self.trials) ** 0.5

    def __str__(self) -> str:
        return (f"p={self.p}, n={self.n}, retries={self.retries}: {self.successes}/{self.trials}"
                f" runs succeeded = {self.estimate:.3f} +- {self.standard_error:.3f}")

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


def simulate_chain(p: float, n: int, trials: int = 20_000, retries: int = 0,
                   p_retry: float | None = None, seed: int = 0) -> Simulation:
    """Simulate ``trials`` runs of ``n`` steps; a failed step is retried up to ``retries`` times.

    Each attempt is an independent scripted outcome (success with probability ``p`` for the
    first attempt, ``p_retry`` for a retry). A run succeeds when every step eventually succeeds.
    """
    _check(p, n, retries)
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be an integer >= 1, got {trials!r}.")
    p_retry = p if p_retry is None else p_retry
    _check(p_retry, n)
    rng = np.random.default_rng(seed)
    ok = rng.random((trials, n)) < p
    for _ in range(retries):
        ok |= rng.random((trials, n)) < p_retry
    successes = int(ok.all(axis=1).sum()) if n else trials
    return Simulation(p, n, retries, trials, successes)


def success_curves(rates: Sequence[float], max_steps: int = 30,
                   retries: int = 0) -> dict[float, list[float]]:
    """For each per-step rate, the run's success for 1..``max_steps`` steps (data for a plot)."""
    return {p: [chain_success_with_recovery(p, n, retries) for n in range(1, max_steps + 1)]
            for p in rates}


def plot_success_curves(rates: Sequence[float] = (0.99, 0.95, 0.9, 0.8), max_steps: int = 30,
                        retries: int = 1):
    """Success vs number of steps, without recovery (solid) and with ``retries`` (dashed)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = range(1, max_steps + 1)
    plain = success_curves(rates, max_steps)
    recovered = success_curves(rates, max_steps, retries)
    for p in rates:
        (line,) = ax.plot(steps, plain[p], label=f"p={p}")
        ax.plot(steps, recovered[p], linestyle="--", color=line.get_color())
    ax.axvline(10, color="grey", linewidth=0.5)
    ax.axhline(0.95**10, color="grey", linewidth=0.5)
    ax.set_xlabel("steps that must all succeed")
    ax.set_ylabel("P(run succeeds)")
    ax.set_title(f"solid: no recovery; dashed: {retries} retry per failed step")
    ax.set_ylim(0, 1.02)
    ax.legend()
    return fig
