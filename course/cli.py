"""What the course's command lines share: argument types that refuse nonsense by name, and a
guard that keeps a committed result from being overwritten by default.

Every command line of the course (``python -m course.finetune``, ``course.tools.bfcl``,
``classroom.grading``, ...) ends a bad input the same way: one or a few lines on stderr saying
what was wrong and the fix, exit status 2, no stack trace. The argparse types here
(:func:`whole_number`, :func:`seconds`, :func:`json_object`, :func:`safe_name`) give argparse
that message at parse time, before anything is loaded; :func:`output_problem` says why a
result may not be written at a path (a folder, a file that exists, a result the course ships in
``course/data/``) unless the person asked to replace it.

Not handled: parsing itself (argparse does it), errors raised later by the work a command does
(each command catches the course's own errors and passes them to ``parser.error``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["COMMITTED_DATA", "json_object", "output_problem", "safe_name", "seconds",
           "whole_number"]

#: The folder of results the course ships (committed to git): never overwritten by default.
COMMITTED_DATA = Path(__file__).resolve().parent / "data"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:30]!r}... ({len(text)} characters)"


def whole_number(minimum: int = 1, maximum: int | None = None,
                 example: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from ``minimum`` (to ``maximum``), else an error that
    names the range and an example."""
    def parse(text: str) -> int:
        value = int(text) if re.fullmatch(r"\s*[+-]?\d{1,18}\s*", text) else None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            span = f"from {minimum} to {maximum}" if maximum is not None else \
                f"at least {minimum}"
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is not allowed: give a whole number {span}, e.g. "
                f"{example if example is not None else max(minimum, 1)}")
        return value
    parse.__name__ = "whole number"  # argparse names the type in its own messages
    return parse


def seconds(maximum: float, allow_zero: bool = False,
            example: float = 5) -> Callable[[str], float]:
    """An argparse type: a number of seconds above 0 (or 0 with ``allow_zero``), at most
    ``maximum``; nan, inf and words are refused naming the range."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value >= 0 if allow_zero else value > 0
        if not (low_ok and value <= maximum):
            low = "from 0" if allow_zero else "above 0"
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is not allowed: give seconds {low} and at most {maximum:g}, "
                f"e.g. {example:g}")
        return value
    parse.__name__ = "seconds"
    return parse


def json_object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object (``'{"quantity": 2}'``), else an error saying so."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not JSON ({err}); give a JSON object, e.g. "
            "'{\"quantity\": 2}'") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is JSON but not an object; give "
                                         "names and values in braces, e.g. '{\"quantity\": 2}'")
    return value


def safe_name(text: str) -> str:
    """An argparse type: a name used as ONE folder or file name (letters, digits, ``.``, ``_``,
    ``-``; starting with a letter or digit; at most 100 characters): never empty, never a path
    (``../x``, ``a/b``) that would write outside its folder."""
    if not _NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a name: give one folder name of letters, digits, '.', '_' "
            "or '-' (no '/', not starting with '.' or '-'), e.g. my-adapter")
    return text


def output_problem(path: Path, *, overwrite: bool, flag: str = "--overwrite") -> str | None:
    """Why a result may not be written at ``path`` (with the fix), or None when it may.

    A folder, a path under a file or in a folder that does not exist, or one that cannot be
    written: never (checked before the work, so a long run is not lost at the end); a file that
    exists only with ``overwrite`` (the person passed ``flag``); a result the course ships
    (under :data:`COMMITTED_DATA`) is named as such, since a chapter shows it.
    """
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder: give a file name, e.g. {path / 'result.json'}"
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            return f"{path} cannot be made: {parent} is a file, not a folder"
    folder = path.absolute().parent
    if not folder.is_dir():
        return (f"{path} cannot be written: its folder {folder} does not exist. Fix: make it "
                "first, or give a file in a folder that exists")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{path} cannot be written: no write permission. Fix: give a file you can write"
    if path.exists() and not overwrite:
        try:
            committed = path.resolve().is_relative_to(COMMITTED_DATA)
        except OSError:
            committed = False
        if committed:
            return (f"{path} is a result the course ships (a chapter shows it): it is not "
                    "overwritten by default. Fix: leave out --out to write a new file in this "
                    f"folder, or pass {flag} to replace it on purpose (git keeps the old one)")
        return (f"{path} exists: give a new file name, or pass {flag} to replace it")
    return None
