"""``python -m course.finetune``: generate the trajectories, train the adapter, evaluate it.

Options: ``--steps N`` (a bounded run), ``--name NAME`` (the adapter's folder under
``course/data/adapters/``), ``--seed S``, ``--threads T``, ``--no-eval`` (train only),
``--eval-only`` (evaluate the committed adapter), ``--eval-steps K`` (agent steps per held-out
task), ``--trajectories N`` (N trajectories of :mod:`course.finetune.tasks`' many families
instead of the 96 of :func:`course.finetune.data.training_tasks`), ``--prompt compact`` (render,
train and evaluate with the course's compact system prompt, :mod:`course.agents.prompts`),
``--held-out note|all`` (the 6 tasks of :func:`~course.finetune.data.held_out_tasks`, or the 33
of :func:`course.finetune.heldout.held_out_set`), ``--kin K`` (kin per family of ``all``),
``--mix NAME`` (family weights of ``--trajectories``, :data:`course.finetune.tasks.MIXES`),
``--from NAME`` (start from that adapter's weights, e.g. to go on with a new mix),
``--learning-rate LR``, ``--taught-only`` (evaluate without the base beside it).
The same options and seed give the same trajectories, the same order of steps and the same
adapter; rendering, training and evaluation each show a progress bar with its ETA. The adapter,
``manifest.json``, ``train_log.jsonl`` and ``trajectories.jsonl`` are written to the adapter's
folder; the evaluation is printed and saved as ``evaluation.json``.

A bad option is refused in a line or two with exit status 2 before any model is loaded:
numbers below 1, a name that is not one folder name (``''``, ``../x``), ``--eval-only`` with
``--no-eval``, and ``--eval-only`` on an adapter that does not exist or does not match its
manifest.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _parser() -> argparse.ArgumentParser:
    from course.cli import safe_name, whole_number

    parser = argparse.ArgumentParser(prog="python -m course.finetune", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=whole_number(1, example=96), default=None,
                        help="optimiser steps (default 96)")
    parser.add_argument("--name", type=safe_name, default=None,
                        help="adapter folder name (default smollm2-tools)")
    parser.add_argument("--seed", type=whole_number(0, 2**32 - 1, example=0), default=0)
    parser.add_argument("--threads", type=whole_number(1, example=2), default=None)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--no-eval", action="store_true", help="train only")
    only.add_argument("--eval-only", action="store_true", help="evaluate an existing adapter")
    parser.add_argument("--eval-steps", type=whole_number(1, example=3), default=3)
    parser.add_argument("--trajectories", type=whole_number(1, 100_000, example=2000), default=None,
                        help="trajectories of the many task families (default: the 96 of data.py)")
    parser.add_argument("--prompt", choices=("default", "compact"), default=None,
                        help="the agent's system prompt for data, training and evaluation "
                             "(default: 'default'; with --eval-only, the adapter's own)")
    parser.add_argument("--held-out", choices=("note", "all"), default="all",
                        help="note: the note's three and one kin each; all: 3 + 3 x kin tasks")
    parser.add_argument("--kin", type=whole_number(0, 11, example=10), default=10,
                        help="kin per held-out family with --held-out all (default 10)")
    parser.add_argument("--mix", default=None, help="family weights of --trajectories "
                        "(course.finetune.tasks.MIXES: default, code)")
    parser.add_argument("--from", dest="start_from", type=safe_name, default=None,
                        help="start from this adapter's weights instead of a fresh LoRA")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="peak learning rate (default 6e-4)")
    parser.add_argument("--taught-only", action="store_true",
                        help="evaluate the taught model only (not the base beside it)")
    parser.add_argument("--search-misses", type=whole_number(0, 3, example=1), default=0,
                        help="evaluate on the lookup tasks only, where the first N searches find "
                             "nothing (written to evaluation-search-misses.json)")
    return parser


def _checked(parser: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, str]:
    """The options, refused with exit status 2 before any model is loaded when they cannot
    work; and the prompt the run uses (with ``--eval-only``, the adapter's own)."""
    from course.adapter_manifest import DEFAULT_ADAPTER, AdapterError, adapter_dir, check_adapter

    args = parser.parse_args(argv)
    if args.mix is not None:
        from course.finetune.tasks import MIXES

        if args.mix not in MIXES:
            parser.error(f"--mix {args.mix}: use one of {', '.join(MIXES)}.")
        if not args.trajectories:
            parser.error("--mix needs --trajectories N (the 96 of data.py have no mix).")
    if args.start_from is not None:
        if args.eval_only:
            parser.error("--from trains; with --eval-only there is no training (leave one out).")
        if not adapter_dir(args.start_from).is_dir():
            parser.error(f"--from {args.start_from}: no adapter folder {adapter_dir(args.start_from)}.")
    if args.search_misses and not args.eval_only:
        parser.error(f"--search-misses {args.search_misses} evaluates an adapter that exists: "
                     "add --eval-only (and --name).")
    if args.learning_rate is not None and not 0 < args.learning_rate < 1:
        parser.error(f"--learning-rate {args.learning_rate}: use a value like 6e-4.")
    name = args.name or DEFAULT_ADAPTER
    out = adapter_dir(name)
    prompt = args.prompt or "default"
    if args.eval_only:  # before any model is loaded: the adapter must exist and match
        try:
            trained_with = check_adapter(out).get("settings", {}).get("prompt", "default")
        except AdapterError as err:
            there = sorted(q.parent.name for q in out.parent.glob("*/manifest.json"))
            parser.error(f"--eval-only --name {name}: {err} (adapters here: "
                         f"{', '.join(there) or 'none'})")
        if args.prompt and args.prompt != trained_with:
            parser.error(f"--prompt {args.prompt}: the adapter {name} was trained with the "
                         f"{trained_with} prompt; evaluate it with that one (leave --prompt out).")
        prompt = trained_with
    return args, prompt


def main(argv: list[str] | None = None) -> int:
    from course.settings import apply_offline_default

    apply_offline_default()
    from course.adapter_manifest import DEFAULT_ADAPTER, adapter_dir, check_adapter

    args, prompt = _checked(_parser(), argv)
    name = args.name or DEFAULT_ADAPTER
    out = adapter_dir(name)

    import torch

    from course.finetune.train import TrainSettings

    if args.threads:
        torch.set_num_threads(args.threads)
    from course.agents.prompts import prompt_templates

    templates = prompt_templates() if prompt == "compact" else None
    if not args.eval_only:
        from course.finetune.data import data_hash, render_all, training_tasks, trajectories_jsonl
        from course.finetune.tasks import generate
        from course.finetune.train import loss_curve, tokenize, train
        from course.models import agent_tokenizer

        settings = TrainSettings(name=name, seed=args.seed, threads=args.threads, prompt=prompt,
                                 start_from=args.start_from or "", mix=args.mix or "default")
        if args.learning_rate is not None:
            settings.learning_rate = args.learning_rate
        if args.steps is not None:
            settings.steps = args.steps
        elif args.trajectories:
            settings.steps = args.trajectories  # one pass
        settings.check()
        tokenizer = agent_tokenizer()[0]
        start = time.perf_counter()
        from course.finetune.tasks import MIXES

        trajectories = (generate(args.trajectories, args.seed, MIXES[settings.mix]) if args.trajectories
                        else training_tasks(args.seed))
        rendered = render_all(trajectories, tokenizer, templates, progress=True)
        samples = tokenize(rendered, tokenizer)
        print(f"[scripted] {len(trajectories)} training trajectories rendered through a real "
              f"CodeAgent in {time.perf_counter() - start:.0f} s (families: "
              f"{', '.join(sorted({t.family for t in trajectories}))})", flush=True)
        result = train(samples, settings, out_dir=out, data_sha256=data_hash(rendered),
                       trajectories_text=trajectories_jsonl(trajectories))
        print(result, flush=True)
        print(f"manifest: {json.dumps({k: result.manifest[k] for k in ('steps', 'wall_seconds', 'first_loss', 'final_loss', 'mean_loss_first_8', 'mean_loss_last_8', 'data_sha256')})}",
              flush=True)
        curve = ", ".join(f"{a}-{b}: {m:.3f}" for a, b, m in loss_curve(result.losses))
        print(f"[measured] mean loss per 8 steps: {curve}", flush=True)
        del result
    if args.no_eval:
        return 0
    from course.finetune.data import held_out_tasks
    from course.finetune.evaluate import compare_on_held_out
    from course.finetune.heldout import by_family, by_family_text, held_out_set, lookup_tasks

    tasks = held_out_set(kin=args.kin) if args.held_out == "all" else held_out_tasks()
    if args.search_misses:
        tasks = lookup_tasks(tasks)
    comparison = compare_on_held_out(out, tasks=tasks, max_steps=args.eval_steps,
                                     prompt_templates=templates, include_base=not args.taught_only,
                                     search_misses=args.search_misses)
    print(comparison, flush=True)
    families = by_family(comparison.results)
    print("[measured] per family:\n" + by_family_text(families), flush=True)
    record = comparison.as_dict()
    record["by_family"] = families
    record["adapter_sha256"] = check_adapter(out)["files"]["adapter_model.safetensors"]
    record["torch_threads"] = torch.get_num_threads()
    record["prompt"] = prompt
    record["held_out"] = args.held_out if args.held_out == "note" else f"all, {args.kin} kin"
    record["search_misses"] = args.search_misses
    file = "evaluation-search-misses.json" if args.search_misses else "evaluation.json"
    (out / file).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
