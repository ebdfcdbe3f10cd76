"""ruff and mypy are part of the suite: the tree is lint-clean (the complexity gate included) and
checks its types; code and config carry no issue numbers, and docs/ points to nothing outside
the repository."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_types_check():
    """mypy over course/, widgets/ and classroom/ as pyproject.toml configures it (its cache in
    build/, which the suite may write)."""
    out = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_clean():
    # --no-cache: the suite writes nothing into the repository (the instructor-lab test checks it)
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


# the word issue (any case, or issues) then a number, after a space, a hyphen or a '#' (spelt
# with character classes so that this file does not match itself)
ISSUE_NUMBER = re.compile(r"\b[Ii][Ss][Ss][Uu][Ee][Ss]?[ -]?#?[0-9]+")
ISSUE_SCOPE = ["*.py", "*.toml", "Makefile", ".ci/*", "scripts/*"]


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *patterns], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    return [ROOT / name for name in out.stdout.split("\0") if name and (ROOT / name).is_file()]


def test_no_issue_numbers_in_code_or_config():
    """Docstrings, comments and metadata say what they mean, not which issue asked for it: no
    tracked .py, .toml, Makefile, .ci or scripts/ file mentions an issue by its number."""
    found = []
    for path in _tracked(*ISSUE_SCOPE):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if ISSUE_NUMBER.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "say what the issue stood for instead:\n" + "\n".join(found)


# [text](target), [label]: target, and a code span that is a path starting with ../
MD_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$", re.M)
CODE_PATH = re.compile(r"`(\.\./[^`\s]*)`")


def _leaves_repository(doc: Path, target: str) -> bool:
    target = target.split("#", 1)[0].split("?", 1)[0]
    if not target or re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # a URL or mailto:
        return target.lower().startswith("file:")
    if target.startswith(("/", "~")):
        return True
    resolved = (doc.parent / target).resolve()
    return not resolved.is_relative_to(ROOT)


def test_docs_stay_in_the_repository():
    """docs/ is self-contained: no Markdown link in docs/*.md leads to a file outside the
    repository (relative to the page, an absolute path, ``file:``), and no code span names a
    ``../`` path (paths in docs are the repository's, from its root)."""
    found = []
    for doc in _tracked("docs/*.md"):
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            links = [a or b for a, b in MD_LINK.findall(line)]
            for target in [t for t in links if _leaves_repository(doc, t)] + \
                    CODE_PATH.findall(line):
                found.append(f"{doc.relative_to(ROOT)}:{n}: {target}")
    assert found == [], "docs/ points outside the repository:\n" + "\n".join(found)
