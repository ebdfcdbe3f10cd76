"""The sandbox one submission's kernel runs in: bubblewrap (``bwrap``) namespaces, a private
copy of the submission, an unprivileged uid, resource limits and no network.

What the kernel sees: the system's ``/usr`` and ``/etc``, the Python installation and the
virtual environment, the ``course`` and ``widgets`` packages (not ``classroom``, the grader's
own) and the model caches, all read-only; a private ``/tmp`` it may write; its own ``/proc`` (a new PID namespace: the grader and other
submissions are invisible); and one writable folder holding its private copy of the one
submission and the kernel's connection sockets. No network namespace but its own, so nothing
but Unix sockets in that folder reaches out. As root the kernel runs as a uid of its own (one
per concurrent slot, so parallel submissions cannot signal each other), with no capabilities.
Limits (``prlimit``): address space, CPU seconds, file size, processes, no core files.
Killing the ``bwrap`` process ends the PID namespace and every process in it.

Not handled: the CPU and memory of the machine are shared (no cgroup), the read-only system
files are readable, and a kernel exploit escapes any namespace. Without ``bwrap`` the grader
refuses to run unless told ``sandbox=False`` (then the kernel runs with the grader's rights).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import site
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from course.settings import MODEL_SETTING, active_model

__all__ = [
    "SandboxUnavailable",
    "SubmissionRefused",
    "UidPool",
    "bwrap_command",
    "kernel_env",
    "kernel_python",
    "limits_command",
    "private_copy",
    "readable_paths",
    "sandbox_problem",
    "share_caches",
]

FIRST_UID = 61000  # slot i runs as FIRST_UID + i when the grader is root


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here."""


class SubmissionRefused(ValueError):
    """The submission holds a symlink or a file that is not a regular file."""


def sandbox_problem() -> str | None:
    """Why the sandbox cannot run here, or None when it can (runs ``bwrap`` once)."""
    if shutil.which("bwrap") is None:
        return ("bubblewrap is not installed: `sudo apt-get install -y bubblewrap` "
                "(`make grade` does it when run as root)")
    probe = subprocess.run(["bwrap", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/",
                            "--proc", "/proc", "--dev", "/dev", *_user_args(), "true"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here: {probe.stderr.strip()[:200]}"
    return None


def _user_args() -> list[str]:
    return [] if os.geteuid() == 0 else ["--unshare-user"]


class UidPool:
    """Hands out a uid no other sandbox on this machine is using (root only): ``FIRST_UID``
    upwards, each held by an ``flock`` on ``/tmp/course-grading-uid-<uid>.lock`` while in
    use, so parallel workers and parallel grader processes never share one (the process
    limit counts per uid)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()

    def take(self) -> int:
        while True:
            with self._lock:
                for uid in range(FIRST_UID, FIRST_UID + self.size):
                    if uid in self._held:
                        continue
                    fd = os.open(f"/tmp/course-grading-uid-{uid}.lock", os.O_CREAT | os.O_RDWR,
                                 0o600)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)
                        continue
                    self._held[uid] = fd
                    return uid
            time.sleep(0.5)

    def give_back(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid)
        os.close(fd)  # releases the flock


def private_copy(folder: Path, dest: Path, owner: int | None = None) -> None:
    """Copy the student's ``folder`` to ``dest`` (regular files and folders only), owned by
    ``owner`` when given; raise ``SubmissionRefused`` on a symlink or any other kind of file.
    ``.ipynb_checkpoints`` is skipped."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        raise SubmissionRefused(f"{folder.name}: the submission folder is a symlink or not a folder")
    dest.mkdir(parents=True)
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name == ".ipynb_checkpoints":
            continue
        mode = entry.stat(follow_symlinks=False).st_mode
        target = dest / entry.name
        if stat.S_ISDIR(mode):
            private_copy(Path(entry.path), target, owner)
        elif stat.S_ISREG(mode):
            shutil.copyfile(entry.path, target, follow_symlinks=False)
        else:
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
            raise SubmissionRefused(f"{entry.name} is {kind}: submissions hold regular files only")
    if owner is not None:
        for path in (dest, *dest.rglob("*")):
            os.chown(path, owner, owner)


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    return args


def readable_paths() -> list[Path]:
    """What the kernel needs to read: Python, the virtual environment and its packages, the
    course packages, the model caches (and ``COURSE_MODEL`` when it names a local folder)."""
    import course.checks
    from course.assets import course_cache_dir, hub_cache_dir

    # By a module's file: a folder named ``course`` in the grader's working folder (an nbgrader
    # course in a class hub's home) makes ``course`` itself a namespace package without one.
    project = Path(course.checks.__file__).resolve().parents[1]
    paths = [Path(sys.base_prefix), Path(sys.prefix), project / "course", project / "widgets",
             course_cache_dir(), hub_cache_dir(),
             *map(Path, site.getsitepackages())]  # resolved: a venv linking another's packages
    model = active_model()  # a setting that cannot work stops the grader here, named
    if model.local_path:
        paths.append(Path(model.local_path))
    return [p.resolve() for p in paths if p.exists()]


def kernel_python() -> str:
    """The interpreter the sandboxed kernel starts, by a path the sandbox can see.

    ``sys.executable`` may reach the virtual environment through a symlink (a venv linked from
    ``/tmp`` or a home folder): the sandbox mounts the resolved folders only, so that path does
    not exist inside it and the kernel could not start (every student 0). The folder is
    resolved, the file name kept: ``bin/python`` of the resolved venv still finds its
    ``pyvenv.cfg`` (resolving the file itself would start the base interpreter without the
    venv's packages)."""
    executable = Path(sys.executable)
    return str(executable.parent.resolve() / executable.name)


def _parents(path: Path) -> list[str]:
    """Create ``path``'s parent folders in the sandbox traversable by anyone (bwrap would
    otherwise create them with the grader's umask)."""
    args: list[str] = []
    for parent in reversed(path.parents[:-1]):  # from the top, without "/"
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def limits_command(limits) -> list[str]:
    """The command prefix that applies ``limits`` (a ``ResourceLimits``) to what follows."""
    return ["prlimit", f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}",
            f"--fsize={limits.file_size_bytes}", "--core=0", f"--nproc={limits.processes}", "--"]


def bwrap_command(box: Path, workdir: Path, uid: int | None, limits) -> list[str]:
    """The command prefix that runs a kernel command in the sandbox under ``limits``: ``box``
    is the one writable folder, ``workdir`` the kernel's working directory inside it."""
    binds: list[str] = []
    for path in readable_paths():
        binds += [*_parents(path), "--ro-bind", str(path), str(path)]
    command = [*limits_command(limits), "bwrap", "--unshare-pid", "--unshare-net",
               "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", *_user_args(),
               "--die-with-parent", "--new-session", *_system_binds(),
               # /tmp first: a checkout or a venv under /tmp (CI clones there) is bound on top.
               # Writable by the kernel's uid (bwrap makes a tmpfs 0755, root's): the kernel's
               # IPython, matplotlib and cache folders are there.
               "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp", *binds,
               *_parents(box),
               "--bind", str(box), str(box), "--chdir", str(workdir),
               "--unsetenv", "JPY_PARENT_PID"]
    if uid is not None:  # root: drop to the slot's uid, no capabilities left
        command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", "setpriv",
                    f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all"]
    return [*command, "--"]


def share_caches() -> list[str]:
    """Make the model caches readable by the sandbox's uid (root only): files the course or
    transformers wrote as ``0600`` (a converted ``model.safetensors``) would otherwise make the
    kernel try to rebuild them, and fail on the read-only mount. Only the course cache and the
    Hugging Face hub cache are touched (public model files); returns the paths changed."""
    from course.assets import course_cache_dir, hub_cache_dir

    changed: list[str] = []
    if os.geteuid() != 0:
        return changed
    for top in (course_cache_dir(), hub_cache_dir()):
        if not top.is_dir():
            continue
        for path in (top, *top.rglob("*")):
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            want = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
            if st.st_mode & want != want:
                path.chmod(st.st_mode | want)
                changed.append(str(path))
    return changed


def kernel_env(workdir: Path) -> dict[str, str]:
    """The kernel's whole environment: offline, grading mode, caches, the interpreter's library
    path, nothing else inherited."""
    from course.assets import course_cache_dir, hub_cache_dir

    env = {"PATH": f"{Path(sys.prefix).resolve() / 'bin'}:/usr/local/bin:/usr/bin:/bin",
           "HOME": str(workdir), "LANG": "C.UTF-8", "COURSE_GRADING": "1",
           "NBGRADER_EXECUTION": "autograde", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
           "PYDEVD_DISABLE_FILE_VALIDATION": "1", "TOKENIZERS_PARALLELISM": "false",
           "IPYTHONDIR": "/tmp/ipython", "MPLCONFIGDIR": "/tmp/matplotlib",
           "XDG_CACHE_HOME": "/tmp/cache", "COURSE_CACHE": str(course_cache_dir()),
           "HF_HUB_CACHE": str(hub_cache_dir()), "OMP_NUM_THREADS": "1"}
    if os.environ.get("LD_LIBRARY_PATH"):  # this interpreter's own libpython (a class hub's copy)
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    model = active_model()
    if not model.is_bundled:
        env[MODEL_SETTING] = model.setting
    return env
