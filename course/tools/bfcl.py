"""The Berkeley Function Calling Leaderboard (BFCL v4) on a local model: free vs constrained.

Note 003's ladder: the schema described in the prompt (level 1), native tool calling by a model
trained on a tool format (level 2, about 95-99% well-formed calls), constrained decoding (level
3, the format guaranteed). This module measures level 1 ("free") against level 3
("constrained") on a public benchmark with the benchmark's own judge:

- the data and the judge come from the ``bfcl-eval`` wheel (Apache-2.0), pinned in
  :data:`course.assets.BFCL_PACKAGE`, a data package kept whole: ``python -m course prepare``
  keeps the wheel in the course cache (``pip download --no-deps``, hash-checked; it is never
  installed);
  :func:`load_cases` reads a category's questions and possible answers out of it.
- :func:`load_ast_checker` imports the leaderboard's checker
  (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``) from the wheel, unchanged. Its one heavy
  import, ``bfcl_eval.constants.model_config`` (it imports every API client's model handler:
  openai, anthropic, google, mistral...), is replaced in ``sys.modules`` by a stub whose
  ``MODEL_CONFIG_MAPPING`` answers ``underscore_to_dot = False`` for any model name: the only
  thing the checker reads from it (function names keep their dots, as the course's prompt shows
  them).
- :func:`evaluate_bfcl` asks the model every question greedily, in the course's call format
  (the tool list in the system prompt, :mod:`course.tools.protocol`), once free and once under
  the course's constrained decoding (:mod:`course.tools.constrained`), and counts per category
  and mode: well-formed calls (the reply parses as a call to one of the question's functions)
  and the checker's verdict (right function, right arguments).
- ``python -m course.tools.bfcl`` is the full run (both categories, every question, both modes);
  it prints the table and writes it to a new dated file in the working folder
  (``bfcl_bundled.<date-time>.json``). The committed measurement the chapter shows,
  :data:`BFCL_LAST_RUN` (about 47 CPU-minutes), is replaced only on purpose: ``--out
  course/data/bfcl_bundled.json --overwrite``; any existing file needs ``--overwrite``.
  ``--model bundled+tools`` makes the same run with the base and the course's tools LoRA adapter
  (a ``COURSE_MODEL`` value; default: the probe model), whose committed table is
  :data:`BFCL_TOOLS_RUN`; ``--merge`` joins tables of one model run side by side (one category
  each) into one. A bad option (``--limit 0``, ``--threads 0``, an unknown category or model, a
  table that is not one) is refused in a line or two, exit status 2, before a model is loaded.

Not handled: the other BFCL categories (parallel, live, multi-turn, irrelevance), BFCL's own
prompt formats and model handlers (the course's one prompt is used for every model), and
questions with an ``array``, ``dict``, ``tuple`` or ``any`` required parameter in constrained
mode (the course's decoder writes flat arguments only): :func:`flat_case` says which, and
both modes are scored on the same flat questions (free mode also on all of them). Constrained
mode fills the required parameters only, integers without sign or decimals.
"""

from __future__ import annotations

import json
import sys
import time
import types
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from course.assets import BFCL_PACKAGE, AssetError, fetch_data_package
from course.records import Record

if TYPE_CHECKING:  # imported where used: the command line checks its arguments before they load
    from course.tools.constrained import PrefixCache

__all__ = ["BFCL_LAST_RUN", "BFCL_TOOLS_RUN", "CATEGORIES", "CHECKER", "BfclCase", "BfclRow", "BfclRun",
           "bfcl_output", "bfcl_wheel", "evaluate_bfcl", "flat_case", "judge", "load_ast_checker",
           "load_cases", "model_label", "reply_to", "tool_schema"]

#: The categories measured, with their question file's name in the wheel.
CATEGORIES = {"simple": "simple_python", "multiple": "multiple"}
CHECKER = "bfcl_eval/eval_checker/ast_eval/ast_checker.py"
FLAT_TYPES = {"string", "integer", "float", "number", "boolean"}
BFCL_LAST_RUN = Path(__file__).resolve().parents[1] / "data" / "bfcl_bundled.json"
#: The same run with the bundled base + the course's tools adapter (``--model bundled+tools``).
BFCL_TOOLS_RUN = BFCL_LAST_RUN.with_name("bfcl_bundled_tools.json")
MODES = ("free", "constrained")
MODEL_NAME = "course-local"  # what the checker is told; the stub answers for any name


def bfcl_wheel() -> Path:
    """The pinned ``bfcl-eval`` wheel in the course cache: ``python -m course prepare`` keeps it
    (a data package kept whole, hash-checked, never installed); fetched on first use if not."""
    return fetch_data_package(BFCL_PACKAGE)


@dataclass(frozen=True)
class BfclCase:
    """One BFCL question: its id, the user's turn, the functions offered, the possible answers."""

    id: str
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    possible_answer: list[dict[str, Any]]


def _json_lines(wheel: Path, member: str) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as zf:
        try:
            text = zf.read(member).decode("utf-8")
        except KeyError as err:
            raise AssetError(f"{wheel.name} has no {member}. Fix: check BFCL_PACKAGE's version in "
                             "course/assets.py.") from err
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_cases(category: str, wheel: Path | None = None) -> list[BfclCase]:
    """The questions of ``category`` ("simple" or "multiple") with their possible answers."""
    if category not in CATEGORIES:
        raise ValueError(f"BFCL category {category!r} is not measured here; choose one of "
                         f"{sorted(CATEGORIES)}")
    wheel = wheel or bfcl_wheel()
    stem = f"BFCL_v4_{CATEGORIES[category]}.json"
    questions = _json_lines(wheel, f"bfcl_eval/data/{stem}")
    answers = {a["id"]: a["ground_truth"]
               for a in _json_lines(wheel, f"bfcl_eval/data/possible_answer/{stem}")}
    return [BfclCase(q["id"], q["question"][0], q["function"], answers[q["id"]])
            for q in questions]


def flat_case(case: BfclCase) -> bool:
    """True when every required parameter of every function is a string, enum, number or bool:
    the arguments the course's constrained decoder can write."""
    for function in case.functions:
        params = function.get("parameters", {})
        for name in params.get("required", []):
            if params.get("properties", {}).get(name, {}).get("type") not in FLAT_TYPES:
                return False
    return True


def _json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """BFCL's parameter types in JSON Schema words (``dict`` -> object, ``float`` -> number)."""
    words = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}
    out: dict[str, Any] = {k: (_json_schema(v) if isinstance(v, dict) and k != "properties" else v)
                           for k, v in schema.items()}
    if "type" in out:
        out["type"] = words.get(out["type"], out["type"])
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: _json_schema(v) for k, v in schema["properties"].items()}
    return out


def tool_schema(function: dict[str, Any], required_only: bool = False) -> dict[str, Any]:
    """A BFCL function as an OpenAI-format tool schema, as the course's prompt and decoder take it."""
    parameters = _json_schema(function.get("parameters", {}))
    if required_only:
        required = parameters.get("required", [])
        parameters = {**parameters, "properties": {
            k: v for k, v in parameters.get("properties", {}).items() if k in required}}
    return {"type": "function", "function": {"name": function["name"],
                                             "description": function.get("description", ""),
                                             "parameters": parameters}}


def bfcl_output(reply: str) -> list[dict[str, Any]] | None:
    """The model's reply as BFCL's checker reads a decoded call (``[{name: {arg: value}}]``),
    or None when the reply is not a call (plain text, or a call that does not parse)."""
    from course.tools.protocol import parse_model_output

    parsed = parse_model_output(reply, strict=True)
    if parsed.kind != "call":
        return None
    return [{parsed.name: dict(parsed.arguments)}]


@lru_cache(maxsize=1)
def load_ast_checker(wheel: Path | None = None) -> Callable[..., dict[str, Any]]:
    """BFCL's ``ast_checker`` imported from the wheel as it ships (see the module docstring)."""
    wheel = wheel or bfcl_wheel()
    if str(wheel) not in sys.path:
        sys.path.append(str(wheel))  # a wheel is a zip: Python imports its pure modules from it
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.__doc__ = ("Stub of bfcl_eval's model_config (which imports every API client): the AST "
                    "checker only asks it whether a model replaces dots in function names.")

    class _AnyModel(dict):
        def __missing__(self, key: str) -> Any:
            return types.SimpleNamespace(underscore_to_dot=False)

    stub.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
    sys.modules.setdefault("bfcl_eval.constants.model_config", stub)
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # type: ignore[import-not-found]

    return ast_checker


def judge(case: BfclCase, category: str, reply: str) -> dict[str, Any]:
    """BFCL's verdict on one reply: ``{"valid": bool, "error": [...], ...}``; a reply that is not
    a call is judged by the checker too, as an empty call list (it says what is wrong)."""
    checker = load_ast_checker()
    from bfcl_eval.constants.enums import Language  # type: ignore[import-not-found]

    output = bfcl_output(reply)
    if output is None:
        return {"valid": False, "error": ["not a call (plain text or unparsable)"],
                "error_type": "course:not_a_call"}
    return checker(case.functions, output, case.possible_answer, Language.PYTHON, category,
                   MODEL_NAME)


@dataclass
class BfclRow:
    """One category and mode: N questions, how many replies were well-formed calls, how many the
    checker accepted, and the wall time."""

    category: str
    mode: str
    subset: str  # "flat" (both modes) or "all" (free only)
    n: int
    well_formed: int
    accepted: int
    seconds: float
    errors: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        return (f"{self.category:<9}{self.mode:<12}{self.subset:<5}{self.n:>5}"
                f"{self.well_formed / self.n:>13.1%}{self.accepted / self.n:>11.1%}"
                f"{self.seconds:>9.0f} s")


@dataclass
class BfclRun(Record):
    """A table of :class:`BfclRow`, with what ran (model, command, date): prints and saves itself.

    Displayed, it shows the table; its values (:meth:`record`) are what ran and the rows."""

    provenance: str
    model: str
    when: str
    rows: list[BfclRow] = field(default_factory=list)
    examples: dict[str, str] = field(default_factory=dict)  # one reply per category/mode/error
    seconds: float = 0.0  # the whole run's wall time, prompts included
    questions: dict[str, list[str]] = field(default_factory=dict)  # category -> ids asked (flat)

    def __str__(self) -> str:
        head = (f"BFCL v4 ({self.provenance}; model {self.model}; judge: bfcl-eval "
                f"{BFCL_PACKAGE.version} {CHECKER}; {self.when})")
        cols = (f"{'category':<9}{'mode':<12}{'set':<5}{'N':>5}{'well-formed':>13}"
                f"{'accepted':>11}{'time':>11}")
        return "\n".join([head, cols, *(row.line() for row in self.rows)])

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def record(self) -> dict[str, Any]:
        return {"provenance": self.provenance, "model": self.model, "when": self.when,
                "rows": [asdict(row) for row in self.rows], "seconds": self.seconds}

    def to_json(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def merge(cls, runs: Sequence[BfclRun], note: str = "") -> BfclRun:
        """One table from runs of one model made side by side (e.g. one category each);
        ``note`` (how they ran, e.g. "two processes side by side") heads the joined ``when``."""
        if not runs:
            raise ValueError("nothing to merge: give at least one BFCL table")
        models = {run.model for run in runs}
        if len(models) != 1:
            raise ValueError(f"these BFCL tables come from different models: {sorted(models)}; "
                             "merge the tables of one model only")
        when = "; ".join(run.when for run in runs)
        merged = cls(runs[0].provenance, runs[0].model, f"{note}: {when}" if note else when)
        for run in runs:
            merged.rows += run.rows
            merged.examples.update(run.examples)
            merged.questions.update(run.questions)
            merged.seconds = max(merged.seconds, run.seconds)
        return merged

    @classmethod
    def from_json(cls, path: Path, provenance: str | None = None) -> BfclRun:
        """The table saved at ``path``; ValueError naming the file when it is not one."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            rows = [BfclRow(**row) for row in data.pop("rows")]
            run = cls(**data, rows=rows)
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError,
                AttributeError) as err:
            raise ValueError(f"{path} is not a BFCL table ({type(err).__name__}: "
                             f"{str(err)[:120]}). Fix: give a table this command wrote, e.g. "
                             f"{BFCL_LAST_RUN.name}") from None
        if provenance:
            run.provenance = provenance
        return run


def reply_to(local: Any, case: BfclCase, mode: str, max_new_tokens: int = 64,
             prefix_cache: PrefixCache | None = None) -> str:
    """The local model's greedy reply to one question, free or under constrained decoding.

    Both modes get the same prompt (the course's tool prompt with the question's functions,
    every parameter shown); constrained mode writes the required parameters only."""
    from course.tools.constrained import sample_replies

    prompt = _prompt(local, case)
    constrained = ([tool_schema(f, required_only=True) for f in case.functions]
                   if mode == "constrained" else None)
    return sample_replies(local, prompt, 1, max_new_tokens=max_new_tokens, temperature=0,
                          constrained_schemas=constrained, prefix_cache=prefix_cache)[0]


def model_label(local: Any) -> str:
    """The model as the table names it: its short name, and the LoRA adapter when one is on."""
    if getattr(local.choice, "with_adapter", False):
        from course.adapter_manifest import adapter_label

        return adapter_label()
    return local.short_name


def _prompt(local: Any, case: BfclCase) -> str:
    from course.tools.protocol import render_tool_prompt

    return render_tool_prompt(local, case.messages, [tool_schema(f) for f in case.functions])


def _well_formed(case: BfclCase, reply: str) -> bool:
    """The reply parses as one call to one of the question's functions."""
    output = bfcl_output(reply)
    return output is not None and next(iter(output[0])) in {f["name"] for f in case.functions}


def evaluate_bfcl(local: Any, categories: Sequence[str] = tuple(CATEGORIES),
                  limit: int | None = None, modes: Sequence[str] = MODES, free_on_all: bool = False, provenance: str = "measured",
             when: str = "", log: Callable[[str], None] | None = None) -> BfclRun:
    """The flat questions of each category (the first ``limit`` of them), in each mode, judged by
    BFCL's checker; with ``free_on_all`` free mode also answers the questions that are not flat
    (:func:`flat_case`), in a row of its own. Both modes read one prompt, run once per question
    (:class:`~course.tools.constrained.PrefixCache`); a row's time is its own generation time."""
    from course.tools.constrained import PrefixCache

    started = time.perf_counter()
    run = BfclRun(provenance, model_label(local), when or time.strftime("%Y-%m-%d"))
    for category in categories:
        cases = load_cases(category)
        flat = [c for c in cases if flat_case(c)][:limit]
        run.questions[category] = [c.id for c in flat]
        rows = {mode: BfclRow(category, mode, "flat", len(flat), 0, 0, 0.0) for mode in modes}
        jobs = [(case, mode, rows[mode]) for case in flat for mode in modes]
        if free_on_all and "free" in modes:
            rest = [c for c in cases if not flat_case(c)][:limit]
            rows["all"] = BfclRow(category, "free", "all", len(flat) + len(rest), 0, 0, 0.0)
            jobs += [(case, "free", rows["all"]) for case in rest]
        prefix: tuple[str, PrefixCache] | None = None
        for case, mode, row in jobs:
            if prefix is None or prefix[0] != case.id:
                prefix = (case.id, PrefixCache(local))
                ids = local.tokenizer(_prompt(local, case), add_special_tokens=False).input_ids
                prefix[1].keep(ids[:-1])
            start = time.perf_counter()
            reply = reply_to(local, case, mode, prefix_cache=prefix[1])
            row.seconds += time.perf_counter() - start
            verdict = judge(case, category, reply)
            row.well_formed += _well_formed(case, reply)
            row.accepted += bool(verdict["valid"])
            if not verdict["valid"]:
                kind = verdict.get("error_type", "?")
                row.errors[kind] = row.errors.get(kind, 0) + 1
                run.examples.setdefault(f"{category}/{mode}/{kind}", f"{case.id}: {reply[:160]}")
        if "all" in rows and "free" in rows:  # the flat questions' free replies count for all
            flat_free, every = rows["free"], rows["all"]
            every.well_formed += flat_free.well_formed
            every.accepted += flat_free.accepted
            every.seconds += flat_free.seconds
            for kind, count in flat_free.errors.items():
                every.errors[kind] = every.errors.get(kind, 0) + count
        for row in rows.values():
            row.errors = dict(sorted(row.errors.items()))
            run.rows.append(row)
            if log:
                log(row.line())
    run.seconds = time.perf_counter() - started
    return run


def _default_out(committed: Path) -> Path:
    """A new dated file in the working folder, named after the committed table it would update."""
    return Path.cwd() / f"{committed.stem}.{time.strftime('%Y-%m-%d_%H%M%S')}.json"


def _main(argv: Sequence[str] | None = None) -> None:  # pragma: no cover - run by hand
    """``python -m course.tools.bfcl [--limit N] [--categories simple,multiple] [--out PATH]
    [--overwrite] [--model SETTING] [--threads N] [--prepare] [--merge TABLE ...]``: every
    question of both categories unless limited (hours on a loaded CPU)."""
    import argparse

    from course.cli import output_problem, whole_number

    parser = argparse.ArgumentParser(prog="python -m course.tools.bfcl",
                                     description="BFCL v4 simple/multiple on the local model, "
                                     "free vs constrained decoding, judged by BFCL's AST checker")
    parser.add_argument("--categories", default=",".join(CATEGORIES),
                        help=f"comma-separated, of {', '.join(CATEGORIES)}")
    parser.add_argument("--limit", type=whole_number(1, example=4), default=None,
                        help="first N flat questions only")
    parser.add_argument("--prepare", action="store_true", help="only fetch the wheel")
    parser.add_argument("--out", type=Path, default=None, help="where the table is saved "
                        f"(default: a new {BFCL_LAST_RUN.stem}.<date-time>.json here)")
    parser.add_argument("--overwrite", action="store_true", help="replace the --out file if it "
                        f"exists (needed to update the committed {BFCL_LAST_RUN.name})")
    parser.add_argument("--model", default=None, help="a COURSE_MODEL value run in this process, "
                        "e.g. bundled+tools (default: the probe model)")
    parser.add_argument("--threads", type=whole_number(1, example=2), default=None,
                        help="torch threads (default: torch's)")
    parser.add_argument("--merge", type=Path, nargs="+", default=None, metavar="TABLE",
                        help="join these saved tables of one model into --out; runs nothing")
    parser.add_argument("--note", default="", help="with --merge: how the runs ran, e.g. "
                        "'two processes side by side'")
    args = parser.parse_args(argv)
    categories = [c.strip() for c in args.categories.split(",")]
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown or not categories:
        parser.error(f"--categories {args.categories!r:.60}: {', '.join(map(repr, unknown))} "
                     f"not measured here; choose from {', '.join(CATEGORIES)} (comma-separated)")
    if args.out is not None and (problem := output_problem(args.out, overwrite=args.overwrite)):
        parser.error(f"--out: {problem}")
    if args.merge:
        missing = [str(p) for p in args.merge if not p.is_file()]
        if missing:
            parser.error(f"--merge: no such table {', '.join(missing)}")
        try:
            merged = BfclRun.merge([BfclRun.from_json(p) for p in args.merge], args.note)
        except ValueError as err:
            parser.error(f"--merge: {err}")
        print(merged)
        print("written to", merged.to_json(args.out or _default_out(BFCL_LAST_RUN)))
        return
    from course.models import load_local_model, probe_model
    from course.settings import CourseSettingError, parse_model_setting

    try:
        choice = parse_model_setting(args.model) if args.model else None
    except CourseSettingError as err:
        parser.error(f"--model: {err}")
    if choice is not None and not choice.in_kernel:
        parser.error(f"--model {args.model}: BFCL runs a model in this process (constrained "
                     "decoding reads its logits); give bundled, bundled+tools, a hub id or a folder")
    print("wheel:", bfcl_wheel(), flush=True)
    if args.prepare:
        return
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:
        local = load_local_model(choice) if choice else probe_model()
    except CourseSettingError as err:
        parser.error(f"--model: {err}")
    out = args.out or _default_out(BFCL_TOOLS_RUN if local.choice.with_adapter else BFCL_LAST_RUN)
    command = "python -m course.tools.bfcl" + (
        f" --model {args.model}" if args.model else "") + (
        f" --categories {args.categories}" if args.categories != ",".join(CATEGORIES) else "") + (
        f" --limit {args.limit}" if args.limit else "") + (
        f" --threads {args.threads}" if args.threads else "")
    run = evaluate_bfcl(local, categories, limit=args.limit, free_on_all=True,
                        log=lambda line: print(line, flush=True))
    run.when = (f"{time.strftime('%Y-%m-%d')}, {command}, greedy, "
                f"{time.perf_counter() - start:.0f} s on a shared 2-core CPU machine")
    print(run)
    print("written to", run.to_json(out))


if __name__ == "__main__":
    _main()
