"""Kernels forked from one pre-imported process (classroom/kernels.py): real ipykernels
started through jupyter_client with the lab's kernelspec (lab/kernels/python3), each test's
zygotes in a private runtime folder of its own module, killed at the end.

Checked by value: a cell sees the environment and folder it was launched with (a setting the
shared zygote never had included); ``course`` is imported fresh in the child while torch comes
from the zygote; two kernels started at once are two children of one zygote; an interrupt stops ``time.sleep(60)``; shutdown leaves no process;
restart gives a new working child; a killed zygote, a stale socket and a changed environment
each give a working kernel (a new zygote where they should); a requester that dies takes its
kernel with it; chapter 00 prints the same text through the forking kernel as through the
ordinary one.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager

from classroom import kernels
from nbharness import NOTEBOOKS, ROOT, kernel_env, run_notebook

sys.path.insert(0, str(ROOT / "benchmarks"))
from kernel_memory import text_outputs

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forking kernels: Linux"),
    pytest.mark.slow,
]

SPEC_DIR = ROOT / "lab" / "kernels"


@pytest.fixture(scope="module")
def rundir(tmp_path_factory):
    path = tmp_path_factory.mktemp("zygotes")
    path.chmod(0o700)
    yield path
    for log in path.glob("*.log"):  # kill what this module's zygotes left
        for line in log.read_text(errors="replace").splitlines():
            if "serving" in line and line.startswith("[course zygote "):
                pid = int(line.split()[2])
                if psutil.pid_exists(pid) and "kernels.py" in " ".join(
                        psutil.Process(pid).cmdline()):
                    os.kill(pid, signal.SIGTERM)


def env_for(rundir: Path, **extra: str) -> dict[str, str]:
    env = kernel_env({kernels.RUNTIME_SETTING: str(rundir), kernels.IDLE_SETTING: "120"})
    env.pop(kernels.FORK_SETTING, None)
    return {**env, **extra}


def manager() -> AsyncKernelManager:
    return AsyncKernelManager(kernel_name="python3",
                              kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(SPEC_DIR)]))


async def start(env: dict[str, str], cwd: Path | str = ROOT) -> tuple[AsyncKernelManager, object]:
    km = manager()
    await km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=180)
    return km, kc


async def run(kc, code: str, timeout: float = 60) -> str:
    """The cell's stdout (an error raises AssertionError with its text)."""
    out: list[str] = []
    errors: list[str] = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")

    reply = await kc.execute_interactive(code, output_hook=hook, timeout=timeout)
    assert reply["content"]["status"] == "ok" or errors, reply["content"]
    if errors:
        raise AssertionError("\n".join(errors))
    return "".join(out)


async def stop(km, kc) -> None:
    kc.stop_channels()
    await km.shutdown_kernel(now=True)


def forked(km) -> kernels.ForkedKernel:
    process = km.provisioner.process
    assert isinstance(process, kernels.ForkedKernel), f"not forked: {process!r}"
    return process


@pytest.fixture(scope="module")
def zygote(rundir) -> int:
    """The zygote of the tests' plain environment, started by a kernel of that environment
    (then shut down): the tests of this module share it, and it never saw their extra settings."""
    async def main():
        km, kc = await start(env_for(rundir))
        try:
            return forked(km).zygote
        finally:
            await stop(km, kc)
    return asyncio.run(main())


def test_a_cell_sees_its_env_and_cwd_and_imports_course_fresh(rundir, zygote, tmp_path):
    # WORKBOOK_PROBE does not change what an import does (not in the fingerprint): the kernel
    # is forked from the shared zygote, whose own environment lacks it
    async def main():
        km, kc = await start(env_for(rundir, WORKBOOK_PROBE="seen here"), cwd=tmp_path)
        try:
            child = forked(km)
            assert psutil.Process(child.pid).ppid() == child.zygote == zygote
            assert "WORKBOOK_PROBE" not in psutil.Process(zygote).environ()
            text = await run(kc, textwrap.dedent("""\
                import json, os, sys
                before = sorted(m for m in ("course", "widgets", "torch", "smolagents")
                                if m in sys.modules)
                import course
                print(json.dumps([os.environ.get("WORKBOOK_PROBE"), os.getcwd(), before,
                                  course.__file__]))"""))
            probe, cwd, before, course_file = json.loads(text)
            assert probe == "seen here"  # from the request, not from the zygote
            assert cwd == str(tmp_path)
            assert before == ["smolagents", "torch"]  # from the zygote; course is not
            assert course_file == str(ROOT / "course" / "__init__.py")
        finally:
            await stop(km, kc)
    asyncio.run(main())


def test_two_kernels_at_once_are_two_children_of_one_zygote(rundir):
    async def main():
        env = env_for(rundir)
        (km1, kc1), (km2, kc2) = await asyncio.gather(start(env), start(env))
        try:
            one, two = forked(km1), forked(km2)
            assert one.pid != two.pid and one.zygote == two.zygote
            assert [await run(kc1, "print(6 * 7)"), await run(kc2, "print(6 * 8)")] == [
                "42\n", "48\n"]
            assert {p.pid for p in psutil.Process(one.zygote).children()} >= {one.pid, two.pid}
            draw = "import random, numpy; print(random.random(), numpy.random.random())"
            assert await run(kc1, draw) != await run(kc2, draw)  # seeded again in each child
        finally:
            await stop(km1, kc1)
            await stop(km2, kc2)
    asyncio.run(main())


def test_interrupt_shutdown_and_restart(rundir):
    async def main():
        km, kc = await start(env_for(rundir))
        try:
            first = forked(km).pid
            sleeping = kc.execute("import time; time.sleep(60)")
            await asyncio.sleep(1.0)
            started = time.monotonic()
            await km.interrupt_kernel()
            while True:  # the sleep's cell ends with KeyboardInterrupt
                msg = await kc.get_iopub_msg(timeout=10)
                if msg["msg_type"] == "error":
                    assert msg["content"]["ename"] == "KeyboardInterrupt"
                    break
            assert time.monotonic() - started < 5
            reply = await kc.get_shell_msg(timeout=10)  # the sleep's cell: its reply (after
            while reply["parent_header"].get("msg_id") != sleeping:  # wait_for_ready's extra
                reply = await kc.get_shell_msg(timeout=10)  # kernel_info replies, if any)
            assert reply["content"]["status"] == "error"
            await asyncio.sleep(1.0)  # ipykernel aborts requests that come right after an error
            assert await run(kc, "print('still here')") == "still here\n"
            await km.restart_kernel(now=True)
            second = forked(km).pid
            assert second != first and not psutil.pid_exists(first)
            await kc.wait_for_ready(timeout=60)
            assert await run(kc, "print('restarted')") == "restarted\n"
        finally:
            await stop(km, kc)
        deadline = time.monotonic() + 5
        while psutil.pid_exists(second) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not psutil.pid_exists(second)
    asyncio.run(main())


def test_killed_zygote_stale_socket_and_another_environment(rundir):
    async def main():
        env = env_for(rundir)
        km, kc = await start(env)
        zygote = forked(km).zygote
        await stop(km, kc)
        os.kill(zygote, signal.SIGKILL)
        while psutil.pid_exists(zygote) and psutil.Process(zygote).status() != "zombie":
            await asyncio.sleep(0.1)
        path = kernels.zygote_socket(sys.executable, env)
        assert path.exists()  # left behind by the killed zygote: nothing accepts on it
        km, kc = await start(env)
        try:
            assert forked(km).zygote != zygote
            assert await run(kc, "print('after a killed zygote')") == "after a killed zygote\n"
            third = forked(km).zygote
        finally:
            await stop(km, kc)
        # a stale socket file: bound once, nobody listening
        os.kill(third, signal.SIGTERM)
        while psutil.pid_exists(third) and psutil.Process(third).status() != "zombie":
            await asyncio.sleep(0.1)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(path))
        stale.close()
        km, kc = await start(env)
        try:
            assert await run(kc, "print('after a stale socket')") == "after a stale socket\n"
            fourth = forked(km).zygote
        finally:
            await stop(km, kc)
        other = env_for(rundir, HF_HOME=str(rundir / "another-hf-home"))
        assert kernels.fingerprint(sys.executable, other) != kernels.fingerprint(
            sys.executable, env)
        km, kc = await start(other)
        try:
            assert forked(km).zygote != fourth
            assert await run(kc, "import os; print(os.environ['HF_HOME'])") == other[
                "HF_HOME"] + "\n"
        finally:
            await stop(km, kc)
    asyncio.run(main())


REQUESTER = """\
import asyncio, json, os, sys
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
async def main():
    km = AsyncKernelManager(kernel_name="python3",
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[sys.argv[1]]))
    await km.start_kernel(env=json.loads(sys.argv[2]))
    kc = km.client(); kc.start_channels(); await kc.wait_for_ready(timeout=180)
    print(json.dumps([km.provisioner.pid, type(km.provisioner.process).__name__]), flush=True)
    os.kill(os.getpid(), 9)  # the requester dies without shutting its kernel down
asyncio.run(main())
"""


def test_the_requester_dying_kills_its_kernel(rundir):
    env = env_for(rundir)
    done = subprocess.run([sys.executable, "-c", REQUESTER, str(SPEC_DIR), json.dumps(env)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == -signal.SIGKILL, done.stderr
    pid, kind = json.loads(done.stdout.splitlines()[-1])
    assert kind == "ForkedKernel"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie":
            break
        time.sleep(0.1)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_the_setting_and_the_runtime_folder_are_checked():
    assert kernels.fork_setting({}) is True
    assert kernels.fork_setting({kernels.FORK_SETTING: "0"}) is False
    with pytest.raises(ValueError, match=r"COURSE_FORK_KERNELS='yes'.*give 1 .* or 0"):
        kernels.fork_setting({kernels.FORK_SETTING: "yes"})
    with pytest.raises(ValueError, match="COURSE_FORK_IDLE_S='soon'"):
        kernels.idle_seconds({kernels.IDLE_SETTING: "soon"})
    # a short folder: under pytest's tmp_path the socket's path length, not the folder's mode,
    # decides the error once the run counter has enough digits
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="k") as short:
        shared = Path(short) / "shared"
        shared.mkdir(mode=0o755)
        shared.chmod(0o755)
        with pytest.raises(kernels.ZygoteError, match="not a private folder"):
            kernels.runtime_dir({kernels.RUNTIME_SETTING: str(shared)})


SEEN = """\
import json, os, signal, sys
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
print(json.dumps({"path": sys.path, "argv": sys.argv, "parent": app.parent_handle,
                  "sigint": str(signal.getsignal(signal.SIGINT)),
                  "sigterm": str(signal.getsignal(signal.SIGTERM)),
                  "mpl": os.environ.get("MPLBACKEND"), "sid": os.getsid(0) == os.getpid()}))
"""


def test_turned_off_is_the_ordinary_kernel_and_a_fork_looks_the_same(rundir, tmp_path):
    async def seen(env):
        km, kc = await start(env, cwd=tmp_path)
        try:
            process = km.provisioner.process
            text = json.loads(await run(kc, SEEN))
            text["argv"] = text["argv"][:1]  # the connection file differs
            return type(process), text
        finally:
            await stop(km, kc)

    async def main():
        kind, ordinary = await seen(env_for(rundir, COURSE_FORK_KERNELS="0"))
        assert kind is subprocess.Popen
        kind, fork = await seen(env_for(rundir))
        assert kind is kernels.ForkedKernel
        assert fork == ordinary
        assert ordinary["parent"] > 0 and ordinary["sid"]
    asyncio.run(main())


@pytest.mark.notebook
def test_chapter_00_prints_the_same_through_the_forking_kernel(rundir):
    # 00 loads the bundled model and generates with it, in 10 s; the benchmark
    # (benchmarks/kernel_memory.py --compare) compares every chapter's outputs both ways.
    name = "00_start_here.ipynb"
    # run_notebook's kernel is the lab's forking one unless the setting turns it off
    ordinary = run_notebook(NOTEBOOKS / name, env={kernels.FORK_SETTING: "0"})
    forks = sum(log.read_text().count("forked kernel") for log in rundir.glob("*.log"))
    forking = run_notebook(NOTEBOOKS / name, env={
        "JUPYTER_PATH": str(ROOT / "lab"), kernels.RUNTIME_SETTING: str(rundir),
        kernels.IDLE_SETTING: "120"})
    texts = text_outputs(ordinary)
    assert texts == text_outputs(forking)  # measured seconds masked (they differ run to run)
    assert len(texts) > 10 and any("SmolLM2-135M-Instruct (bundled)" in text for _, text in texts)
    assert sum(log.read_text().count("forked kernel") for log in rundir.glob("*.log")) == forks + 1


def test_make_lab_puts_the_forking_kernelspec_first():
    dry = subprocess.run(["make", "-n", "--no-print-directory", "lab", "STUDENT_DIR=/nonexistent"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    command = next(line for line in dry.stdout.splitlines() if "jupyter lab" in line)
    assert f"JUPYTER_PATH={ROOT / 'lab'}" in command
    env = {**os.environ, "JUPYTER_PATH": str(ROOT / "lab")}
    found = subprocess.run(
        [sys.executable, "-c", "import json; from jupyter_client.kernelspec import "
         "KernelSpecManager as K; s = K().get_kernel_spec('python3'); "
         "print(json.dumps([s.resource_dir, s.metadata['kernel_provisioner']]))"],
        env=env, capture_output=True, text=True, timeout=60, check=True)
    resource_dir, provisioner = json.loads(found.stdout)
    assert resource_dir == str(SPEC_DIR / "python3")
    assert provisioner["provisioner_name"] == "course-forking"
