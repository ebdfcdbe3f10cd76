"""Tool-choice accuracy against the number of tools the prompt shows, measured with a real model.

Note 003: "50+ tools in one agent: accuracy drops"; the cure is fewer tools per view (coarse
actions, or a few candidates retrieved before the model sees them). :func:`measure_tool_count`
measures it for a model loaded in the kernel: each labelled request of the catalogue gets a
prompt that shows ``k`` tools (the right one always among them, the rest drawn at random, in
random order), and the model picks a tool name under greedy constrained decoding (so every
reply is a valid name: validity is not the variable, the choice is). A draw (:func:`draw_lists`)
cuts a random order of the catalogue into lists of ``k`` tools and asks every request once, with
the list that holds its tool: for each request that is a uniform random set around the right
tool, and a list's tool text is run through the model once for all the requests it serves
(:class:`~course.tools.constrained.PrefixCache`), so the full curve runs in minutes on a CPU.
With ``retriever``, a row "BM25 top-5" shows the 5 tools retrieved for the request instead (the
right one may then be missing: that is retrieval's own error, counted as a miss). The result is
a :class:`ToolCountCurve`, a record that prints its table, plots itself with the spread over
draws, and round-trips through JSON (the notebook shows the last full measurement beside a
small live sample).

Not handled: choosing arguments (only the name is chosen), several tools per request, tools
the model must decline (a call is forced), prompts longer than the model's context window (a
larger size is cut to the most tools the window holds, and the curve's note says so).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from course.records import Record
from course.tools.catalogue import CatalogueTool, ToolRetriever

if TYPE_CHECKING:  # imported where used: the command line checks its arguments before they load
    from course.tools.constrained import PrefixCache

__all__ = ["LAST_FULL_RUN", "ToolCountCurve", "ToolCountPoint", "choose_tool", "draw_lists",
           "measure_tool_count", "tools_that_fit"]

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
class ToolCountCurve(Record):
    """Accuracy per prompt size over several draws, with where the figures came from.

    Displayed, it shows one row per size; its values (:meth:`record`) are those rows."""

    model: str
    points: list[ToolCountPoint] = field(default_factory=list)
    provenance: str = "measured"
    when: str = ""
    note: str = ""

    def sizes(self) -> list[int | str]:
        """The prompt sizes measured, in order (the retrieval row last)."""
        seen: list[int | str] = []
        for p in self.points:
            if p.shown not in seen:
                seen.append(p.shown)
        return seen

    def summary(self) -> dict[int | str, tuple[float, float, float]]:
        """Per size: accuracy over all its choices, and the lowest and highest of its draws."""
        out = {}
        for size in self.sizes():
            draws = [p for p in self.points if p.shown == size]
            values = [p.accuracy for p in draws]
            pooled = sum(p.correct for p in draws) / max(1, sum(p.total for p in draws))
            out[size] = (pooled, min(values), max(values))
        return out

    def __str__(self) -> str:
        head = f"tool-choice accuracy, {self.model} [{self.provenance}{', ' + self.when if self.when else ''}]"
        rows = [head, *([f"  note: {self.note}"] if self.note else [])]
        for size, (mean, low, high) in self.summary().items():
            draws = [p for p in self.points if p.shown == size]
            label = f"{size} tools shown" if isinstance(size, int) else size
            rows.append(f"  {label}: accuracy {mean:.2f} (draws {low:.2f}-{high:.2f}, "
                        f"{len(draws)} draw(s), {sum(p.total for p in draws)} requests asked, "
                        f"prompt up to {max(p.prompt_tokens for p in draws)} tokens)")
        return "\n".join(rows)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def record(self) -> dict[str, Any]:
        rows = []
        for size, (mean, low, high) in self.summary().items():
            draws = [p for p in self.points if p.shown == size]
            rows.append({"shown": size, "accuracy": mean, "low": low, "high": high,
                         "draws": len(draws), "asked": sum(p.total for p in draws),
                         "prompt_tokens": max(p.prompt_tokens for p in draws)})
        return {"model": self.model, "provenance": self.provenance, "when": self.when,
                "note": self.note, "rows": rows}

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
                       label=f"{RETRIEVAL_LABEL} of the whole catalogue", zorder=3)
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


def _prompt(local: Any, request: str, shown: Sequence[CatalogueTool]) -> str:
    from course.tools.protocol import render_tool_prompt

    return render_tool_prompt(local, [{"role": "user", "content": request}],
                              [t.openai_schema() for t in shown])


def choose_tool(local: Any, request: str, shown: Sequence[CatalogueTool],
                prefix_cache: PrefixCache | None = None) -> tuple[str, int]:
    """The tool name the model picks for ``request`` among ``shown`` (constrained, greedy), and
    the prompt size in tokens. With ``prefix_cache`` the prompt starts from the kept tokens."""
    from course.tools.constrained import constrained_call
    from course.tools.protocol import parse_model_output

    prompt = _prompt(local, request, shown)
    reply = constrained_call(local, prompt, _name_only(shown), max_new_tokens=24,
                             prefix_cache=prefix_cache)
    return parse_model_output(reply).name, local.count_tokens(prompt)


def draw_lists(catalogue: Sequence[CatalogueTool], size: int,
               rng: random.Random) -> tuple[list[list[CatalogueTool]], dict[str, int]]:
    """One draw: a random order of the catalogue cut into lists of ``size`` tools (the last
    one topped up with tools drawn from the others), each list shuffled; and for every tool the
    index of the list it was cut into (its home). The home list of a tool is a uniform random
    set of ``size`` tools that holds it, at a uniform random place."""
    order = rng.sample(list(catalogue), len(catalogue))
    lists = [order[i:i + size] for i in range(0, len(order), size)]
    home = {t.name: index for index, chunk in enumerate(lists) for t in chunk}
    if len(lists[-1]) < size:
        rest = order[:len(order) - len(lists[-1])]
        lists[-1] = lists[-1] + rng.sample(rest, size - len(lists[-1]))
    for chunk in lists:
        rng.shuffle(chunk)
    return lists, home


def tools_that_fit(local: Any, catalogue: Sequence[CatalogueTool], margin: int = 160) -> int:
    """The most tools of ``catalogue`` whose prompt surely fits the model's context window (the
    longest tools counted, ``margin`` tokens left for the request and the call)."""
    from course.tools.protocol import render_tool_prompt, tool_list_text

    window = getattr(local.model.config, "max_position_embeddings", None) or 10**9
    blank = [{"role": "user", "content": ""}]
    header = local.count_tokens(render_tool_prompt(local, blank, []))
    lengths = sorted((local.count_tokens(tool_list_text([t.openai_schema()])) + 1
                      for t in catalogue), reverse=True)
    used, fit = header + margin, 0
    for length in lengths:
        if used + length > window:
            break
        used, fit = used + length, fit + 1
    return fit


def measure_tool_count(local: Any, catalogue: Sequence[CatalogueTool],
                       labelled: Sequence[tuple[str, str]], sizes: Sequence[int] = (5, 10, 25),
                       draws: int = 1, seed: int = 0, retriever: ToolRetriever | None = None,
                       model_name: str = "", lists_per_draw: int | None = None,
                       log: Callable[[str], None] | None = None) -> ToolCountCurve:
    """Accuracy of ``local`` at each size in ``sizes`` over ``draws`` draws (see module).

    Each draw asks every request in ``labelled`` once, with the list of :func:`draw_lists` that
    holds its tool; ``lists_per_draw=n`` asks only the requests of the first ``n`` lists that
    serve any (a small live sample). A size larger than :func:`tools_that_fit` is cut to it.
    The retrieval row asks the same requests as the draws. ``log`` gets a line per finished draw.
    """
    from course.tools.constrained import PrefixCache
    from course.tools.protocol import render_tool_prompt

    curve = ToolCountCurve(model_name or getattr(local, "short_name", "model"))
    fit = tools_that_fit(local, catalogue)
    if sizes and max(sizes) > fit:
        curve.note = (f"{max(sizes)} tools do not fit the model's context window of "
                      f"{local.model.config.max_position_embeddings} tokens; "
                      f"{fit} tools were shown instead")
    blank = [{"role": "user", "content": ""}]
    asked_at_all: dict[tuple[str, str], None] = {}  # the requests asked, in order
    for size in dict.fromkeys(min(size, fit, len(catalogue)) for size in sizes):
        for draw in range(draws):
            lists, home = draw_lists(catalogue, size, random.Random(f"{seed}-{size}-{draw}"))
            served = [[(r, e) for r, e in labelled if home[e] == index] for index in range(len(lists))]
            used = [(shown, asked) for shown, asked in zip(lists, served, strict=True) if asked]
            correct, total, longest = 0, 0, 0
            for shown, asked in used[:lists_per_draw]:
                cache = PrefixCache(local)
                base = render_tool_prompt(local, blank, [t.openai_schema() for t in shown])
                cache.keep(local.tokenizer.encode(base, add_special_tokens=False))
                for request, expected in asked:
                    asked_at_all[(request, expected)] = None
                    chosen, tokens = choose_tool(local, request, shown, cache)
                    correct, total = correct + (chosen == expected), total + 1
                    longest = max(longest, tokens)
            curve.points.append(ToolCountPoint(size, draw, correct, total, longest))
            if log:
                log(f"{size} tools, draw {draw}: {correct}/{total}")
    if retriever is not None:
        asked_at_all = dict.fromkeys(labelled) if lists_per_draw is None else asked_at_all
        correct, longest = 0, 0
        for request, expected in asked_at_all:
            chosen, tokens = choose_tool(local, request, retriever.top(request, k=5))
            correct += chosen == expected
            longest = max(longest, tokens)
        curve.points.append(ToolCountPoint(RETRIEVAL_LABEL, 0, correct, len(asked_at_all), longest))
        if log:
            log(f"{RETRIEVAL_LABEL}: {correct}/{len(asked_at_all)}")
    return curve


#: The last full measurement shipped with the course (bundled model), shown when the notebook
#: does not re-run it; ``python -m course.tools.tool_count --out <this file> --overwrite`` rewrites it.
LAST_FULL_RUN = Path(__file__).resolve().parents[1] / "data" / "tool_count_accuracy.json"


def _measure_part(sizes: tuple[int, ...], draws: int, every: int, retrieval: bool) -> ToolCountCurve:
    """One process's share of the full run: the same seeds as a single run, so the same points."""
    from course.models import probe_model
    from course.tools.catalogue import LABELLED_REQUESTS, build_catalogue

    catalogue = build_catalogue()
    return measure_tool_count(probe_model(), catalogue, LABELLED_REQUESTS[::every], sizes=sizes,
                              draws=draws, retriever=ToolRetriever(catalogue) if retrieval else None,
                              log=lambda line: print(line, flush=True))


def _main(argv: Sequence[str] | None = None) -> None:  # pragma: no cover - run by hand
    """``python -m course.tools.tool_count [--sizes 5,10,25,50,122] [--draws 3] [--every 1]
    [--jobs 1] [--out PATH] [--overwrite]``; with ``--jobs 2`` the sizes are split over two
    processes (same points). The table goes to a new dated file in the working folder unless
    ``--out`` says where; the committed one (:data:`LAST_FULL_RUN`) only with ``--overwrite``."""
    import argparse
    import time
    from concurrent.futures import ProcessPoolExecutor

    from course.cli import output_problem, whole_number

    def size_list(text: str) -> tuple[int, ...]:
        parse = whole_number(1, example=5)
        return tuple(parse(part) for part in text.split(","))

    size_list.__name__ = "sizes"
    parser = argparse.ArgumentParser(prog="python -m course.tools.tool_count",
                                     description="measure tool-choice accuracy vs tools shown")
    parser.add_argument("--sizes", type=size_list, default=(5, 10, 25, 50, 122),
                        help="comma-separated numbers of tools shown (default 5,10,25,50,122)")
    parser.add_argument("--draws", type=whole_number(1, example=3), default=3)
    parser.add_argument("--every", type=whole_number(1), default=1,
                        help="use every n-th labelled request")
    parser.add_argument("--jobs", type=whole_number(1, 64, example=2), default=1,
                        help="processes (one torch thread each)")
    parser.add_argument("--out", type=Path, default=None, help="where the curve is saved "
                        f"(default: a new {LAST_FULL_RUN.stem}.<date-time>.json here)")
    parser.add_argument("--overwrite", action="store_true", help="replace the --out file if it "
                        f"exists (needed to update the committed {LAST_FULL_RUN.name})")
    args = parser.parse_args(argv)
    if args.out is not None and (problem := output_problem(args.out, overwrite=args.overwrite)):
        parser.error(f"--out: {problem}")
    out = args.out or Path.cwd() / f"{LAST_FULL_RUN.stem}.{time.strftime('%Y-%m-%d_%H%M%S')}.json"

    start = time.perf_counter()
    sizes = args.sizes
    shares: list[tuple[int, ...]] = [() for _ in range(args.jobs)]
    load = [2.0] + [0.0] * (args.jobs - 1)  # rough cost: the retrieval row (first job) ~ 2 sizes
    for size in sorted(sizes, reverse=True):  # longer lists cost more per token
        lightest = load.index(min(load))
        shares[lightest] += (size,)
        load[lightest] += 1 + min(size, 100) / 50
    with ProcessPoolExecutor(args.jobs) as pool:
        parts = list(pool.map(_measure_part, shares, [args.draws] * args.jobs,
                              [args.every] * args.jobs, [i == 0 for i in range(args.jobs)]))
    curve = parts[0]
    curve.note = next((part.note for part in parts if part.note), "")
    curve.points = sorted((p for part in parts for p in part.points),
                          key=lambda p: (isinstance(p.shown, str), p.shown if isinstance(p.shown, int)
                                         else 0, p.draw))
    curve.when = (f"{time.strftime('%Y-%m-%d')}, python -m course.tools.tool_count --sizes "
                  f"{','.join(map(str, sizes))} --draws {args.draws} --every {args.every} --jobs {args.jobs}, "
                  f"{time.perf_counter() - start:.0f} s on a shared 2-core machine")
    print(curve)
    print("written to", curve.to_json(out))


if __name__ == "__main__":
    _main()
