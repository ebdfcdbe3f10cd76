"""A class on JupyterHub on one machine: a hub, an instructor and two students, nbgrader's exchange.

``make class`` (or ``.venv/bin/python -m classroom.hub``, as root) sets up and starts:

- local Unix accounts ``<prefix>teacher``, ``<prefix>alice`` and ``<prefix>bob`` (``useradd``,
  homes mode 0700: Debian's default 0755 would let a student read another's work), each with a
  random password, printed with the URL and written to ``<state>/logins.txt`` (mode 0600);
- nbgrader's exchange ``<state>/exchange`` (root's, mode 1777: everyone may add, nobody may
  remove another's files), the course id (``agents-workbook``) and the exchange set for every
  user in the class's own Jupyter config folders, given to each server by
  ``JUPYTER_CONFIG_PATH``: ``<state>/jupyter-student`` (the *Assignments* panel, no Formgrader)
  and ``<state>/jupyter-instructor`` (the course template ``nbgrader/nbgrader_config.py``,
  which the instructor's ``~/course`` holds with the chapter's source);
- one chapter (``--chapter``, default ``03_agent_loop``) generated and released by the
  instructor with nbgrader's own commands;
- JupyterHub (PAM logins, one ``LocalProcessSpawner`` server per user, npm's
  ``configurable-http-proxy`` from ``build/class/proxy``, ``make class-proxy``), with the
  class's model server set once for everyone: ``COURSE_MODEL`` in ``c.Spawner.environment``
  when the instructor gives one, else each kernel runs the bundled model from a shared copy of
  the course cache.

The students' servers run as their own users, so they need a Python every user can run. When
the workbook's venv is built on an interpreter under a private folder (pyenv under ``/root``),
``shared_environment`` makes ``build/class/env``: a copy of that interpreter's standard
library and a venv on it that uses the workbook venv's packages (nothing is reinstalled).

``--remove`` stops nothing and removes the class's accounts, each home archived first to
``<state>/removed-homes/<user>.tar.gz``. Used by ``tests/test_class_hub.py`` as a module.

Not handled: HTTPS, a second course (nbgrader's multi-course set-up), shared or NFS homes, a
machine that is not Linux, or running without root (the hub must switch users). A real class
runs the same configuration on The Littlest JupyterHub or zero-to-jupyterhub (README.md, "A class
on JupyterHub").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository: notebooks/, nbgrader/, build/
COURSE_ID = "agents-workbook"
CHAPTER = "03_agent_loop"
PROXY_VERSION = "5.3.0"
PROXY = ROOT / "build" / "class" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
SHARED_ENV = ROOT / "build" / "class" / "env"
ROLES = ("teacher", "alice", "bob")
START_TIMEOUT_S = 120  # a user server (or the hub) that does not answer in this time fails
COMMAND_TIMEOUT_S = 600
# Every user's servers and kernels: offline, the plotting backend for files.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
           "TOKENIZERS_PARALLELISM": "false", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
# The student's lab: the Assignments panel only (no Formgrader, Create Assignment, Courses).
STUDENT_LAB_OFF = ["@jupyterlab/apputils-extension:announcements",
                   "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader",
                   "@jupyter/nbgrader:course-list"]
STUDENT_SERVER_OFF = ["nbgrader.server_extensions.formgrader",
                      "nbgrader.server_extensions.course_list"]


class ClassSetupError(RuntimeError):
    """The class cannot be set up here; the message names what and the fix."""


@dataclass
class ClassHub:
    """One class: where its state lives, its users and their passwords, its hub's address."""

    state: Path
    prefix: str = "class-"
    chapter: str = CHAPTER
    port: int = 8000
    model: str = ""                       # COURSE_MODEL for every user ("" = the bundled model)
    generated_only: tuple[str, ...] = ("00_start_here",)  # in the gradebook, not released
    passwords: dict[str, str] = field(default_factory=dict)
    python: Path = Path(sys.executable)   # the Python every user's server runs
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def instructor(self) -> str:
        return self.prefix + ROLES[0]

    @property
    def students(self) -> list[str]:
        return [self.prefix + role for role in ROLES[1:]]

    @property
    def users(self) -> list[str]:
        return [self.instructor, *self.students]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def exchange(self) -> Path:
        return self.state / "exchange"

    def home(self, user: str) -> Path:
        import pwd

        return Path(pwd.getpwnam(user).pw_dir)

    @property
    def course(self) -> Path:
        """The instructor's nbgrader course folder (``~/course``)."""
        return self.home(self.instructor) / "course"


# ----------------------------------------------------------------------------- checks

def blocked_for_others(path: Path) -> Path | None:
    """The first folder on the way to ``path`` that other users cannot enter (or ``path``
    itself when they cannot read it); None when every user can reach and read it."""
    path = Path(path).absolute()
    for folder in [*reversed(path.parents), path]:
        mode = folder.stat().st_mode
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return folder
    return None if path.stat().st_mode & stat.S_IROTH else path


def _require_root() -> None:
    if sys.platform != "linux" or os.geteuid() != 0:
        raise ClassSetupError(
            "the class hub switches to each user's account, so it runs as root on Linux. "
            "Fix: sudo make class (or sudo .venv/bin/python classroom/hub.py)")


def proxy_command() -> Path:
    """npm's configurable-http-proxy, installed by ``make class-proxy`` into build/class/proxy."""
    if not PROXY.exists():
        raise ClassSetupError(f"{PROXY} is missing (JupyterHub's proxy). Fix: make class-proxy "
                              f"(npm install configurable-http-proxy@{PROXY_VERSION} there)")
    return PROXY


# ----------------------------------------------------------------------------- a shared Python

def shared_environment(dest: Path = SHARED_ENV) -> tuple[Path, dict[str, str]]:
    """The Python every user's server runs and the environment it needs.

    The workbook's venv itself when every user can run it; otherwise ``dest``: a copy of its
    base interpreter (binary, libpython, standard library without tests and site-packages) and
    a venv on that copy whose site-packages, ``share`` and ``etc`` are the workbook venv's
    (symlinks) and whose commands are the venv's with their first line pointing at it. Rebuilt
    when the interpreter or the venv changes.
    """
    venv, base = Path(sys.prefix), Path(sys.base_prefix)
    if venv == base:
        raise ClassSetupError("run classroom/hub.py with the workbook's venv "
                              "(.venv/bin/python), not a system Python")
    blocked = blocked_for_others(ROOT) or blocked_for_others(venv)
    if blocked:
        raise ClassSetupError(
            f"every user's server reads the workbook at {ROOT}, but {blocked} is closed to other "
            f"users (mode {stat.S_IMODE(blocked.stat().st_mode):o}). Fix: clone the workbook "
            "into a folder every user can read (for example /opt or /srv)")
    interpreter = Path(os.path.realpath(sys.executable))
    if blocked_for_others(interpreter) is None and blocked_for_others(base / "lib") is None:
        return venv / "bin" / "python", {}
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    commands = sorted(p.name for p in (venv / "bin").iterdir())  # a new command: rebuilt
    stamp = f"{interpreter} {interpreter.stat().st_mtime_ns} {venv} {' '.join(commands)}"
    if (dest / "stamp").exists() and (dest / "stamp").read_text() == stamp:
        return dest / "venv" / "bin" / "python", {"LD_LIBRARY_PATH": str(dest / "base" / "lib")}
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "base" / "bin").mkdir(parents=True)
    (dest / "base" / "lib").mkdir()
    shutil.copy2(interpreter, dest / "base" / "bin" / version)
    for lib in (base / "lib").glob("libpython*"):
        shutil.copy2(lib, dest / "base" / "lib" / lib.name, follow_symlinks=False)
    shutil.copytree(base / "lib" / version, dest / "base" / "lib" / version, symlinks=True,
                    ignore=shutil.ignore_patterns("site-packages", "test", "idlelib"))
    twin = dest / "venv"
    (twin / "bin").mkdir(parents=True)
    (twin / "lib" / version).mkdir(parents=True)
    (twin / "pyvenv.cfg").write_text(
        f"home = {dest / 'base' / 'bin'}\ninclude-system-site-packages = false\n"
        f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
    for name in ("python", "python3", version):
        (twin / "bin" / name).symlink_to(dest / "base" / "bin" / version)
    (twin / "lib" / version / "site-packages").symlink_to(venv / "lib" / version / "site-packages")
    for name in ("share", "etc"):
        if (venv / name).exists():
            (twin / name).symlink_to(venv / name)
    shebang = f"#!{venv}/bin/python"
    for script in (venv / "bin").iterdir():
        if script.name.startswith("python") or not script.is_file():
            continue
        try:
            text = script.read_text()
        except UnicodeDecodeError:
            continue
        if text.startswith(shebang):
            first, _, rest = text.partition("\n")
            target = twin / "bin" / script.name
            target.write_text(f"#!{twin}/bin/python{first[len(shebang):]}\n{rest}")
            target.chmod(0o755)
    for path in [dest, *dest.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
    (dest / "stamp").write_text(stamp)
    return twin / "bin" / "python", {"LD_LIBRARY_PATH": str(dest / "base" / "lib")}


def shared_cache(state: Path) -> Path:
    """The prepared course cache (the bundled model, data files) in ``state``, readable by
    every user: hard links to the instructor machine's cache (a copy across file systems)."""
    from course.assets import course_cache_dir

    source = course_cache_dir()
    if not (source / "manifest.json").exists():
        raise ClassSetupError(f"the course cache {source} is not prepared. "
                              "Fix: make assets (python -m course prepare)")
    dest = state / "course-cache"
    if dest.exists():
        shutil.rmtree(dest)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, dest, copy_function=link)
    for path in [dest, *dest.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    return dest


# ----------------------------------------------------------------------------- accounts

def create_accounts(users: list[str]) -> dict[str, str]:
    """A local account per name (home mode 0700, a random password); refuses existing names."""
    import pwd

    existing = []
    for user in users:
        try:
            pwd.getpwnam(user)
            existing.append(user)
        except KeyError:
            pass
    if existing:
        raise ClassSetupError(
            f"the accounts {', '.join(existing)} exist already. Fix: --prefix <another>, or "
            "--remove to remove the class's accounts (their homes archived first)")
    passwords = {}
    for user in users:
        subprocess.run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash",
                        "-K", "HOME_MODE=0700", user], check=True, capture_output=True,
                       timeout=60)
        passwords[user] = secrets.token_urlsafe(9)
        subprocess.run(["chpasswd"], input=f"{user}:{passwords[user]}\n", text=True, check=True,
                       capture_output=True, timeout=60)
    return passwords


def remove_accounts(users: list[str], archive: Path | None) -> list[str]:
    """Remove each existing account and its home, the home archived first to
    ``archive/<user>.tar.gz`` (None: not archived). Returns the accounts removed."""
    import pwd

    removed = []
    for user in users:
        try:
            home = Path(pwd.getpwnam(user).pw_dir)
        except KeyError:
            continue
        subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True, timeout=30)
        if archive is not None and home.exists():
            archive.mkdir(parents=True, exist_ok=True, mode=0o700)
            with tarfile.open(archive / f"{user}.tar.gz", "w:gz") as tar:
                tar.add(home, arcname=user)
        subprocess.run(["userdel", "--remove", user], capture_output=True, timeout=60)
        removed.append(user)
    return removed


def as_user(user: str, cmd: list[str], cls: ClassHub, cwd: Path | None = None,
            timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run ``cmd`` as ``user`` with the environment their server has."""
    home = cls.home(user)
    return subprocess.run(cmd, user=user, group=user, extra_groups=[], cwd=cwd or home,
                          env={**user_environment(cls, user), "HOME": str(home), "USER": user},
                          capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------- configuration

def user_environment(cls: ClassHub, user: str) -> dict[str, str]:
    """What every server (and kernel) of ``user`` gets in its environment."""
    role = "instructor" if user == cls.instructor else "student"
    env = {"PATH": f"{cls.python.parent}:/usr/local/bin:/usr/bin:/bin",
           "JUPYTER_CONFIG_PATH": str(cls.state / f"jupyter-{role}"),
           "COURSE_CACHE": str(cls.state / "course-cache"), **OFFLINE, **cls.extra_env}
    if cls.model:
        env["COURSE_MODEL"] = cls.model
    return env


def write_configuration(cls: ClassHub) -> None:
    """The exchange, the two roles' Jupyter config folders, the instructor's course folder."""
    cls.exchange.mkdir(parents=True, exist_ok=True)
    os.chown(cls.exchange, 0, 0)
    cls.exchange.chmod(0o1777)
    shared = (f"c = get_config()  # noqa: F821\n"
              f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
              f"c.Exchange.root = {str(cls.exchange)!r}\n")
    student = cls.state / "jupyter-student"
    (student / "labconfig").mkdir(parents=True, exist_ok=True)
    (student / "nbgrader_config.py").write_text(shared)
    (student / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": dict.fromkeys(STUDENT_LAB_OFF, True)}, indent=1))
    (student / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": dict.fromkeys(STUDENT_SERVER_OFF, False)}},
        indent=1))
    instructor = cls.state / "jupyter-instructor"
    (instructor / "labconfig").mkdir(parents=True, exist_ok=True)
    (instructor / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {STUDENT_LAB_OFF[0]: True}}, indent=1))
    course = cls.course
    (instructor / "nbgrader_config.py").write_text(
        shared + "# The course template (its own folder is the course's root and gradebook).\n"
        f"load_subconfig({str(course / 'nbgrader_config.py')!r})  # noqa: F821\n")
    course.mkdir(exist_ok=True)
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader_config.py")
    for chapter in _chapters(cls):
        source = course / "source" / chapter
        source.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "notebooks" / f"{chapter}.ipynb", source / f"{chapter}.ipynb")
    subprocess.run(["chown", "-R", f"{cls.instructor}:{cls.instructor}", str(course)],
                   check=True, timeout=60)
    for path in [cls.state, student, instructor, *student.rglob("*"), *instructor.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def hub_config(cls: ClassHub) -> str:
    """jupyterhub_config.py for the class."""
    envs = {user: user_environment(cls, user) for user in cls.users}
    taken = {cls.port}
    hub_port, proxy_api = free_port(taken), free_port(taken)
    ports = {user: free_port(taken) for user in cls.users}
    return f'''"""The class's JupyterHub (written by classroom/hub.py)."""
c = get_config()  # noqa: F821
ENVIRONMENTS = {envs!r}

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {cls.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.command = [{str(proxy_command())!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.JupyterHub.db_url = "sqlite:///{cls.state / "hub" / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = "{cls.state / "hub" / "jupyterhub_cookie_secret"}"
c.JupyterHub.pid_file = "{cls.state / "hub" / "jupyterhub.pid"}"
c.JupyterHub.cleanup_servers = True

# The machine's own accounts and passwords (PAM); only the class may log in.
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = {set(cls.users)!r}

# One server per user, started as that user in their home, JupyterLab first.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{str(cls.python)!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = {START_TIMEOUT_S}
c.Spawner.http_timeout = {START_TIMEOUT_S}
c.Spawner.args = ["--ServerApp.terminals_enabled=False", "--ServerApp.port_retries=0"]
# Each user's server on a port of its own, below the ports the system hands out at random.
PORTS = {ports!r}


def _port(spawner):
    spawner.port = PORTS[spawner.user.name]


c.Spawner.pre_spawn_hook = _port
# The class model server and the course settings, set once here for every user.
c.Spawner.environment = {{"COURSE_MODEL": {cls.model!r}}} if {bool(cls.model)!r} else {{}}
c.Spawner.environment.update({{key: (lambda spawner, key=key: ENVIRONMENTS[spawner.user.name][key])
                               for key in ENVIRONMENTS[{cls.instructor!r}]}})
'''


def free_port(taken: set[int] | None = None) -> int:
    """A free loopback port below Linux's ephemeral range (32768-60999), so that no kernel or
    client socket, which the system gives ports from that range, takes it before its server
    binds it (a user server whose port a kernel had taken kept the hub waiting)."""
    taken = taken if taken is not None else set()
    rng = secrets.SystemRandom()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise ClassSetupError("no free loopback port between 20000 and 32000. Fix: --port and "
                          "free some ports")


def _chapters(cls: ClassHub) -> list[str]:
    return [cls.chapter, *[c for c in cls.generated_only if c != cls.chapter]]


def release(cls: ClassHub) -> None:
    """The instructor generates the chapters, releases ``cls.chapter`` and adds the students to
    the gradebook (nbgrader's own commands, run as the instructor in ``~/course`` through
    :mod:`classroom.grading.nbgrader_cli`).

    Every chapter under ``~/course/source`` is generated, by one nbgrader run (the assignment id
    ``*``): ``write_configuration`` put the class's chapters there, in a home ``create_accounts``
    has just made."""
    nbgrader = [str(cls.python), "-m", "classroom.grading.nbgrader_cli"]
    # The class list, so that Formgrader names each student (and lists them before they submit).
    roster = cls.course / "students.csv"
    roster.write_text("id,first_name,last_name\n" + "".join(
        f"{s},{s.removeprefix(cls.prefix).title()},Student\n" for s in cls.students))
    shutil.chown(roster, cls.instructor, cls.instructor)
    steps = [["generate_assignment", "*", "--force"],
             ["release_assignment", cls.chapter, "--force"],
             ["db", "student", "import", str(roster)]]
    for step in steps:
        done = as_user(cls.instructor, [*nbgrader, *step], cls, cwd=cls.course)
        if done.returncode:
            raise ClassSetupError(f"nbgrader {' '.join(step)} failed as {cls.instructor}:\n"
                                  f"{done.stderr[-3000:]}")


def set_up(cls: ClassHub) -> None:
    """Everything before the hub starts: accounts, shared Python and cache, config, release."""
    _require_root()
    proxy_command()
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", cls.port))
        except OSError:
            raise ClassSetupError(f"port {cls.port} (CLASS_PORT, --port) is in use. "
                                  "Fix: CLASS_PORT=<another port>") from None
    cls.python, extra = shared_environment()
    cls.extra_env.update(extra)
    cls.state.mkdir(parents=True, exist_ok=True)
    cls.state.chmod(0o755)
    if blocked_for_others(cls.state):
        raise ClassSetupError(f"every user reads the class folder {cls.state}, but "
                              f"{blocked_for_others(cls.state)} is closed to them. "
                              "Fix: --state in a folder every user can read")
    (cls.state / "hub").mkdir(exist_ok=True, mode=0o700)
    shared_cache(cls.state)
    cls.passwords = create_accounts(cls.users)
    logins = cls.state / "logins.txt"
    logins.write_text("".join(f"{u} {p}\n" for u, p in cls.passwords.items()))
    logins.chmod(0o600)
    write_configuration(cls)
    release(cls)
    (cls.state / "hub" / "jupyterhub_config.py").write_text(hub_config(cls))


def start_hub(cls: ClassHub, log) -> subprocess.Popen:
    """Start JupyterHub and wait (at most START_TIMEOUT_S) until it answers."""
    hub = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyterhub"), "-f",
         str(cls.state / "hub" / "jupyterhub_config.py")],
        cwd=cls.state / "hub", stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            urllib.request.urlopen(f"{cls.url}/hub/api", timeout=2)
            return hub
        except OSError:
            if hub.poll() is not None or time.monotonic() > deadline:
                stop_hub(hub)
                raise ClassSetupError(f"JupyterHub did not answer at {cls.url} in "
                                      f"{START_TIMEOUT_S} s; its log: {getattr(log, 'name', '')}") from None
            time.sleep(0.5)


def stop_hub(hub: subprocess.Popen) -> None:
    """Stop the hub (it stops the users' servers and the proxy it started), bounded."""
    if hub.poll() is None:
        os.killpg(hub.pid, signal.SIGTERM)
        try:
            hub.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
            hub.wait(10)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _account_prefix(text: str) -> str:
    """argparse type: the start of a Unix account name (``useradd``'s rule), at most 20
    characters, so ``<prefix>teacher`` fits in 32."""
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,19}", text):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} cannot start an account name: give lower-case letters, digits, '_' "
            "or '-' (starting with a letter or '_', at most 20), e.g. class-")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m classroom.hub",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, default=ROOT / "build" / "class" / "state",
                        help="the class's folder (exchange, configs, hub database)")
    parser.add_argument("--prefix", type=_account_prefix, default="class-",
                        help="the accounts' name prefix")
    parser.add_argument("--chapter", default=CHAPTER, help="the chapter released")
    from course.cli import whole_number

    parser.add_argument("--port", type=whole_number(1024, 65535, example=8000), default=8000)
    parser.add_argument("--remove", action="store_true",
                        help="remove the class's accounts (homes archived in <state>/removed-homes)")
    args = parser.parse_args(argv)
    cls = ClassHub(state=args.state.absolute(), prefix=args.prefix, chapter=args.chapter,
                   port=args.port, model=os.environ.get("COURSE_MODEL", ""))
    try:
        if args.remove:
            _require_root()
            removed = remove_accounts(cls.users, cls.state / "removed-homes")
            print(f"removed {', '.join(removed) or 'no accounts'}; homes archived in "
                  f"{cls.state / 'removed-homes'}")
            return 0
        if not (ROOT / "notebooks" / f"{cls.chapter}.ipynb").exists():
            raise ClassSetupError(f"--chapter {cls.chapter}: notebooks/{cls.chapter}.ipynb "
                                  "does not exist")
        set_up(cls)
        with (cls.state / "hub" / "jupyterhub.log").open("w") as log:
            hub = start_hub(cls, log)
            print(f"\nThe class is at {cls.url} (log: {log.name})\n")
            role = {cls.instructor: "instructor (Nbgrader > Formgrader)"}
            for user, password in cls.passwords.items():
                print(f"  {user:20} {password:16} {role.get(user, 'student (Nbgrader > Assignments)')}")
            print(f"\nModel: {cls.model or 'the bundled SmolLM2-135M-Instruct'} for every user. "
                  f"Ctrl-C stops the hub; the accounts stay until: make class-remove\n")
            signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the hub as Ctrl-C does
            try:
                hub.wait()
            except KeyboardInterrupt:
                pass
            finally:
                stop_hub(hub)
    except ClassSetupError as err:
        print(f"make class: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
