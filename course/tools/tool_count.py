"""Tool-choice accuracy against the number of tools the prompt shows, measured with a real model.

Note 003: "50+ tools in one agent: accuracy drops"; the cure is fewer tools per view (coarse
actions, or a few candidates retrieved before the model sees them). :func:`measure_tool_count`
measures it for a model loaded in the kernel: for each labelled request of the catalogue, a
prompt shows ``k`` tools (the right one always among them, the rest drawn at random, several
draws), and the model picks a tool name under constrained decoding (so every reply is a valid
name: validity is not the variable, the choice is). With ``retriever``, a row "BM25 top-5" shows
the 5 tools retrieved for the request instead (the right one may then be missing: that is
retrieval's own error, counted as a miss). The result is a :class:`ToolCountCurve`, a record
that prints its table, plots itself with the spread over draws, and round-trips through JSON
(the notebook shows the last full measurement when the full run is switched off).

Not handled: choosing arguments (only the name is chosen), several tools per request, tools
the model must decline (a call is forced), prompts longer than the model's context window
(the size is reported; a model that cannot hold 122 tools is measured on what it can).
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from course.tools.catalogue import CatalogueTool, ToolRetriever
from course.tools.constrained import constrained_call
from course.tools.protocol import parse_model_output, render_tool_prompt

__all__ = ["LAST_FULL_RUN", "ToolCountCurve", "ToolCountPoint", "choose_tool", "measure_tool_count"]

RETRIEVAL_LABEL = "BM25 top-5"


@dataclass
class ToolCountPoint:
    """One draw at one prompt size: how many requests got the right tool."""

    shown: int | str  # number of tools in the prompt, or RETRIEVAL_LABEL
    draw: int
    correct: int
    total: int
    prompt_tokens: int = 0  # the largest prompt of the draw, in the model's own tokens

    @property
    def accuracy(self) -> float:
        """Share of requests answered with the right tool."""
        return self.correct / self.total if self.total else 0.0


@dataclass
class ToolCountCurve:
    """Accuracy per prompt size over several draws, with where the figures came from."""

    model: str
    points: list[ToolCountPoint] = field(default_factory=list)
    provenance: str = "measured"
    when: str = ""

    def sizes(self) -> list[int | str]:
        """The prompt sizes measured, in order (the retrieval row last)."""
        seen: list[int | str] = []
        for p in self.points:
            if p.shown not in seen:
                seen.append(p.shown)
        return seen

    def summary(self) -> dict[int | str, tuple[float, float, float]]:
        """Per size: mean, lowest and highest accuracy over the draws."""
        out = {}
        for size in self.sizes():
            values = [p.accuracy for p in self.points if p.shown == size]
            out[size] = (statistics.fmean(values), min(values), max(values))
        return out

    def __str__(self) -> str:
        head = f"tool-choice accuracy, {self.model} [{self.provenance}{', ' + self.when if self.when else ''}]"
        rows = [head]
        for size, (mean, low, high) in self.summary().items():
            draws = [p for p in self.points if p.shown == size]
            label = f"{size} tools shown" if isinstance(size, int) else size
            rows.append(f"  {label}: accuracy {mean:.2f} (draws {low:.2f}-{high:.2f}, "
                        f"{len(draws)} draw(s) x {draws[0].total} requests, "
                        f"prompt up to {max(p.prompt_tokens for p in draws)} tokens)")
        return "\n".join(rows)

    def plot(self, ax: Any = None) -> Any:
        """Accuracy vs tools shown (mean, and the range over draws); retrieval as a marker."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.2))
        summary = self.summary()
        sizes = [s for s in summary if isinstance(s, int)]
        means = [summary[s][0] for s in sizes]
        ax.plot(sizes, means, marker="o", label="tools drawn at random (mean)")
        ax.plot(sizes, [1 / s for s in sizes], ls="--", color="grey", label="chance (1/k)")
        ax.fill_between(sizes, [summary[s][1] for s in sizes], [summary[s][2] for s in sizes],
                        alpha=0.25, label="range over draws")
        if RETRIEVAL_LABEL in summary:
            ax.scatter([5], [summary[RETRIEVAL_LABEL][0]], marker="*", s=160, color="C3",
                       label=f"{RETRIEVAL_LABEL} of all {max(sizes, default=5)}", zorder=3)
        ax.set_xscale("log")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_ylim(0, 1)
        ax.set_xlabel("tools shown in the prompt")
        ax.set_ylabel("right tool chosen")
        ax.set_title(f"{self.model} [{self.provenance}]", fontsize=10)
        ax.legend(fontsize=8)
        return ax

    def to_json(self, path: str | Path) -> Path:
        """Write the curve as JSON and return the path."""
        path = Path(path)
        path.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")
        return path

    @classmethod
    def from_json(cls, path: str | Path, provenance: str | None = None) -> ToolCountCurve:
        """Read a curve written by :meth:`to_json` (optionally relabelling its provenance)."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        points = [ToolCountPoint(**p) for p in data.pop("points")]
        curve = cls(points=points, **data)
        if provenance:
            curve.provenance = provenance
        return curve


def _name_only(tools: Sequence[CatalogueTool]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "parameters": {}}} for t in tools]


def choose_tool(local: Any, request: str, shown: Sequence[CatalogueTool]) -> tuple[str, int]:
    """The tool name the model picks for ``request`` among ``shown`` (constrained), and the
    prompt size in tokens."""
    prompt = render_tool_prompt(local, [{"role": "user", "content": request}],
                                [t.openai_schema() for t in shown])
    reply = constrained_call(local, prompt, _name_only(shown), max_new_tokens=24)
    return parse_model_output(reply).name, local.count_tokens(prompt)


def measure_tool_count(local: Any, catalogue: Sequence[CatalogueTool],
                       labelled: Sequence[tuple[str, str]], sizes: Sequence[int] = (5, 10, 25),
                       draws: int = 1, seed: int = 0, retriever: ToolRetriever | None = None,
                       model_name: str = "") -> ToolCountCurve:
    """Accuracy of ``local`` at each size in ``sizes`` over ``draws`` random draws (see module)."""
    by_name = {t.name: t for t in catalogue}
    curve = ToolCountCurve(model_name or getattr(local, "short_name", "model"))
    for size in sizes:
        size = min(size, len(catalogue))
        for draw in range(draws if size < len(catalogue) else 1):
            rng = random.Random(f"{seed}-{size}-{draw}")
            correct, longest = 0, 0
            for request, expected in labelled:
                others = [t for t in catalogue if t.name != expected]
                shown = [by_name[expected], *rng.sample(others, size - 1)]
                rng.shuffle(shown)
                chosen, tokens = choose_tool(local, request, shown)
                correct += chosen == expected
                longest = max(longest, tokens)
            curve.points.append(ToolCountPoint(size, draw, correct, len(labelled), longest))
    if retriever is not None:
        correct, longest = 0, 0
        for request, expected in labelled:
            chosen, tokens = choose_tool(local, request, retriever.top(request, k=5))
            correct += chosen == expected
            longest = max(longest, tokens)
        curve.points.append(ToolCountPoint(RETRIEVAL_LABEL, 0, correct, len(labelled), longest))
    return curve


#: The last full measurement shipped with the course (bundled model), shown when the notebook
#: does not re-run it; rewrite it with ``python -m course.tools.tool_count``.
LAST_FULL_RUN = Path(__file__).resolve().parents[1] / "data" / "tool_count_accuracy.json"


def _main(argv: Sequence[str] | None = None) -> None:  # pragma: no cover - run by hand
    """``python -m course.tools.tool_count [--sizes 5,10,25,50,122] [--draws 3] [--every 1]``."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description="measure tool-choice accuracy vs tools shown")
    parser.add_argument("--sizes", default="5,10,25,50,122")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--every", type=int, default=1, help="use every n-th labelled request")
    args = parser.parse_args(argv)

    from course.models import probe_model
    from course.tools.catalogue import LABELLED_REQUESTS, build_catalogue

    local = probe_model()
    catalogue = build_catalogue()
    start = time.perf_counter()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    curve = measure_tool_count(local, catalogue, LABELLED_REQUESTS[::args.every], sizes=sizes,
                               draws=args.draws, retriever=ToolRetriever(catalogue))
    curve.when = (f"{time.strftime('%Y-%m-%d')}, python -m course.tools.tool_count --sizes "
                  f"{args.sizes} --draws {args.draws} --every {args.every}, "
                  f"{time.perf_counter() - start:.0f} s on a shared 2-core machine")
    print(curve)
    print("written to", curve.to_json(LAST_FULL_RUN))


if __name__ == "__main__":
    _main()
