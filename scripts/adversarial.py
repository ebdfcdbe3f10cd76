"""The adversarial re-run: every contract test (bad input), and a table of outcomes by area.

    .venv/bin/python scripts/adversarial.py [--junit FILE] [--timeout S] [-- PYTEST ARGS]

Runs ``tests/test_contract_*.py`` with pytest in a subprocess (``-p no:xdist``, a junit XML in a
temporary folder, each test bounded by pytest-timeout and the whole run by ``--run-timeout``)
and prints, per area (settings, cache and doctor, local model, conversation store, tool door,
workspace, audit, grader, servers, command lines), the number of cases and their outcomes: ``ok`` for a case
that passes, else the kind its test checks (data loss, hang, raw crash, unclear error, wrong
result). Each contract test says its kind with ``@pytest.mark.contract("<kind>")`` on the test,
on one ``pytest.param`` or as the module's ``pytestmark`` (the innermost wins); this file is
also the pytest plugin (``-p adversarial``) that copies the kind into the junit XML as a
property. A case with no kind, or an unknown one, is listed as ``unmarked`` and fails the run;
skipped cases are counted apart. Exit status 0 when every case is ok.

What it does not do: invent attacks (the cases are the tests'), or say how slow a case was
beyond pytest's own times (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("data loss", "hang", "raw crash", "unclear error", "wrong result")
PROPERTY = "contract_kind"
AREAS = {  # test module: area, in the order the table prints them
    "test_contract_settings": "settings",
    "test_contract_cache": "cache and doctor",
    "test_contract_local_model": "local model",
    "test_contract_store": "conversation store",
    "test_contract_door": "tool door",
    "test_contract_workspace": "workspace",
    "test_contract_audit": "audit",
    "test_contract_grader": "grader",
    "test_contract_grading_more": "grader",
    "test_contract_server": "servers",
    "test_contract_cli": "command lines",
}
COLUMNS = ("ok", *KINDS, "unmarked", "skipped")


# --- the pytest plugin: each case's kind into the junit XML -----------------------------------

def case_kind(item) -> str:
    """The kind of ``item``: its own (param, then function) contract mark, else its module's."""
    own = [m for m in getattr(item, "own_markers", []) if m.name == "contract"]
    marker = own[-1] if own else item.get_closest_marker("contract")
    kind = marker.args[0] if marker is not None and marker.args else None
    return kind if kind in KINDS else "unmarked"


def pytest_collection_modifyitems(items) -> None:  # pytest hook
    for item in items:
        item.user_properties.append((PROPERTY, case_kind(item)))


# --- the run and the table ----------------------------------------------------------------------

def contract_files() -> list[Path]:
    """Every contract test module, the known areas first in table order, then any new one."""
    found = sorted((ROOT / "tests").glob("test_contract_*.py"))
    order = list(AREAS)
    return sorted(found, key=lambda p: (order.index(p.stem) if p.stem in order else len(order),
                                        p.stem))


def area_of(classname: str) -> str:
    module = classname.split(".")[-1]
    return AREAS.get(module, module.removeprefix("test_contract_").replace("_", " "))


def read_junit(path: Path) -> list[dict]:
    """One row per test case: area, name, kind, outcome (ok, skipped or the kind), message."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        kind = props.get(PROPERTY, "unmarked")
        failed = case.find("failure")
        if failed is None:
            failed = case.find("error")
        if case.find("skipped") is not None and failed is None:
            outcome = "skipped"
        elif failed is not None:
            outcome = kind
        else:
            outcome = "unmarked" if kind == "unmarked" else "ok"
        message = "" if failed is None else (failed.get("message") or "")[:160]
        rows.append({"area": area_of(case.get("classname", "")), "name": case.get("name", ""),
                     "file": case.get("classname", "").split(".")[-1], "kind": kind,
                     "outcome": outcome, "message": message})
    return rows


def table(rows: list[dict], key: str = "outcome", columns: tuple[str, ...] = COLUMNS) -> str:
    """The table by area: cases, then a column per ``key`` value (outcome, or the kind each
    case checks), and a total row."""
    by_area: dict[str, Counter] = defaultdict(Counter)
    order: list[str] = []
    for area in [*dict.fromkeys(AREAS.values()), *(r["area"] for r in rows)]:
        if area not in order and any(r["area"] == area for r in rows):
            order.append(area)
    for row in rows:
        by_area[row["area"]][row[key]] += 1
    total = sum(by_area.values(), Counter())
    head = ("area", "cases", *columns)
    body = [(area, str(sum(by_area[area].values())), *(str(by_area[area][c]) for c in columns))
            for area in order]
    body.append(("total", str(sum(total.values())), *(str(total[c]) for c in columns)))
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]

    def fmt(line):
        return "| " + " | ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                 for i, (cell, w) in enumerate(zip(line, widths, strict=True))) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(head), rule, *(fmt(line) for line in body[:-1]), rule, fmt(body[-1])])


def run(junit: Path, timeout: float, run_timeout: float, extra: list[str]) -> int:
    """Run the contract tests into ``junit``; pytest's exit code (or 124 when cut off)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "adversarial",
               "-p", "no:cacheprovider", f"--junitxml={junit}", "-o", "junit_family=xunit1",
               f"--timeout={timeout:g}", *map(str, contract_files()), *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parent)}
    try:
        return subprocess.run(command, cwd=ROOT, env=env, timeout=run_timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"the run passed --run-timeout={run_timeout:g} s and was stopped", file=sys.stderr)
        return 124


def _seconds(maximum: float, example: float):
    """course.cli's argparse type for seconds (imported when the command line runs: as a pytest
    plugin this file needs nothing of the course)."""
    sys.path.insert(0, str(ROOT))
    from course.cli import seconds

    return seconds(maximum, example=example)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junit", type=Path, help="keep the junit XML here (default: a temp dir)")
    parser.add_argument("--timeout", type=_seconds(3600, 600), default=600,
                        help="seconds one test may take before it fails as a hang (600)")
    parser.add_argument("--run-timeout", type=_seconds(86400, 5400), default=5400,
                        help="seconds the whole run may take (5400)")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments, e.g. -k")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="adversarial-") as tmp:
        junit = args.junit or Path(tmp) / "contract.xml"
        code = run(junit, args.timeout, args.run_timeout, args.pytest_args)
        if not junit.is_file():
            print(f"no junit XML at {junit}: pytest ended with {code} before writing it",
                  file=sys.stderr)
            return code or 1
        rows = read_junit(junit)
    print()
    print(f"Contract cases by area ({len(rows)} cases; a failing case counts as the kind its "
          "test checks):")
    print(table(rows))
    print()
    print("What the same cases check (the kind a failure would count as):")
    print(table(rows, key="kind", columns=(*KINDS, "unmarked")))
    bad = [r for r in rows if r["outcome"] not in ("ok", "skipped")]
    for row in bad:
        print(f"  {row['outcome']}: {row['file']}::{row['name']} {row['message']}")
    skipped = [r for r in rows if r["outcome"] == "skipped"]
    for row in skipped:
        print(f"  skipped: {row['file']}::{row['name']}")
    return 0 if not bad and code in (0, 5) else (code or 1)


if __name__ == "__main__":
    sys.exit(main())
