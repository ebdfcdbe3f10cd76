"""The check guard: what the grader asks the kernel right before and right after every check
cell, so that a check scores only when the genuine ``course.checks.check`` reported success.

Before a check cell the grader sends an empty, silent execute request whose one user
expression (evaluated by IPython without its input or AST transformers) runs
``RESTORE_SOURCE``: grading mode set again in ``os.environ``; trace and profile hooks removed;
AST transformers, post input transformers and the input transformer manager reset; every
event callback not defined in the Python installation or the virtual environment dropped;
``course.checks`` loaded afresh from its file, armed with a fresh random token, and bound to
``check`` in the user namespace. It answers a digest of the token, which the grader verifies.
After the cell a second expression returns the verdicts the fresh module recorded for that
token; the grader requires at least one and all "passed".

Not handled (the checks run in the student's interpreter, so code written against this guard
can still defeat it): rebinding the names the expressions use (``exec``, ``__import__``) or
IPython's ``user_expressions``, threads that re-install hooks between the guard and the check,
callbacks compiled with a forged file name, patching ``importlib`` or the interpreter via
``ctypes``, and answers that compare equal to anything (``__eq__`` returning True). Each of
these fails closed against a naive attempt (the guard's answer is missing) and needs code that
imitates the guard.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

import course.checks

__all__ = ["RESTORE_SOURCE", "new_token", "restore_expression", "restored_answer",
           "verdicts_expression"]

CHECKS_FILE = Path(course.checks.__file__).resolve()

RESTORE_SOURCE = r'''
import hashlib, importlib.util, os, sys, threading
_ip = sys.modules["IPython"].core.getipython.get_ipython()
os.environ["COURSE_GRADING"] = "1"
os.environ["NBGRADER_EXECUTION"] = "autograde"
sys.settrace(None); sys.setprofile(None); threading.settrace(None); threading.setprofile(None)
_ip.ast_transformers = []
_ip.input_transformers_post = []
_ip.input_transformer_manager = sys.modules["IPython.core.inputtransformer2"].TransformerManager()
_trusted = tuple({sys.base_prefix, sys.prefix})
def _is_trusted(f):
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    return code is not None and code.co_filename.startswith(_trusted)
for _callbacks in _ip.events.callbacks.values():
    _callbacks[:] = [f for f in _callbacks if _is_trusted(f)]
_spec = importlib.util.spec_from_file_location("course.checks", checks_file)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
sys.modules["course.checks"] = _module
if "course" in sys.modules:
    sys.modules["course"].checks = _module
_module._GRADER["token"] = token
_ip.user_ns["check"] = _module.check
answer = hashlib.sha256(("restored:" + token).encode()).hexdigest()
'''


def new_token() -> str:
    """A fresh secret for one check cell."""
    return secrets.token_hex(16)


def restore_expression(token: str) -> str:
    """The user expression that restores the check machinery and arms ``token``."""
    scope = {"token": token, "checks_file": str(CHECKS_FILE)}
    return f"(lambda g: (exec({RESTORE_SOURCE!r}, g), g['answer'])[1])({scope!r})"


def restored_answer(token: str) -> str:
    """The text/plain reply ``restore_expression(token)`` must produce."""
    return repr(hashlib.sha256(("restored:" + token).encode()).hexdigest())


def verdicts_expression(token: str) -> str:
    """The user expression that returns the verdicts recorded for ``token``."""
    return ("[v for t, v in __import__('sys').modules['course.checks']._GRADER['outcomes'] "
            f"if t == {token!r}]")
