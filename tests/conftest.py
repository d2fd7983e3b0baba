"""Shared by every test folder: this folder is on ``sys.path`` (pytest's rootdir-relative
conftest import), so helpers such as :mod:`vllm_releases` import by their plain name."""

from __future__ import annotations

import functools
import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ending import pytest_cmdline_main  # noqa: F401 - a hook: pytest finds it by its name
from host_zygote import PYTHON_PRELOADED, HostZygote
from zygote import Zygote


def _compile_once() -> None:
    """Bytecode read and written beside each source, as Python does by default.

    Where bytecode is not written (``PYTHONDONTWRITEBYTECODE``, as on this project's
    machines), every process the tests start (the CLI, hosts, inner pytest runs, a few
    hundred in the default tier) compiled kvoffload's modules from source again, about
    0.15 s of CPU each. The session lets Python write bytecode again, in the
    ``__pycache__`` folders beside the sources (git ignores them), and its children
    inherit that: kvoffload's modules and the tests' are compiled once and kept between
    sessions (a ``.pyc`` records its source's size and time, so an edited module is
    compiled again), the installed packages' bytecode (pip writes it at install) is
    read as it is, and what ``python -O`` needs (``.opt-1.pyc``, which no install
    writes) is written once where the folder is writable.

    Not a folder of its own (``PYTHONPYCACHEPREFIX``, as until session 34): under a
    prefix Python reads no ``__pycache__`` beside the source, the installed packages'
    included, so every session compiled torch, LMCache and vLLM again in the tests'
    process, the LMCache zygote and the ``-O`` replays (about 8 s of CPU each time, the
    s34-engines measurements)."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.dont_write_bytecode = False


_compile_once()


def _collect_the_oldest_rarely() -> None:
    """Full (generation 2) collections no more than once per 1,000 generation-1 ones.

    The default tier imports torch, LMCache, vLLM's offloading code and Hypothesis into
    one process: about 600,000 objects the cyclic collector tracks by the end (980,000
    with this change), most of them long-lived. With CPython's default thresholds (700,
    10, 10) every tenth generation-1 collection may be a full one, and each scanned the
    whole heap: 41 full collections took 12.7 s of the run's CPU, all collections 18.8 s
    (gc.callbacks, session 34, docs/performance.md). Collecting the oldest generation
    rarely left 4 full collections (3.1 s; all collections 8.4 s) and raised the peak
    resident size from 680 MB to 858 MB. Only the tests' process is affected:
    nothing the suite ships sets a threshold, and the processes the tests start keep
    the default."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1000)


_collect_the_oldest_rarely()


@pytest.fixture(autouse=True)
def _lmcache_installed(request: pytest.FixtureRequest) -> None:
    """Tests marked ``lmcache`` run on LMCache 0.5.6's real code: without it they skip,
    and under CI (``CI=true``) they fail, so a green run never hides a missing install."""
    if request.node.get_closest_marker("lmcache") is None:
        return
    from kvoffload.conformance.target.lmcache_loader import installed_version

    have = installed_version()
    if have != "0.5.6":
        reason = f"LMCache 0.5.6 is not installed (found {have}): pip install -e '.[lmcache]'"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (under CI a green run may not hide a missing install)")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def lmcache_zygote() -> Iterator[Zygote]:
    """One process for the session that has imported torch and LMCache and nothing of
    kvoffload; each engine script runs in a fork of it (:mod:`zygote`). Started at once,
    so its imports run beside the first test's own (without LMCache it ends at once, and
    the tests that asked for it skip)."""
    zygote = Zygote()
    zygote.start()
    yield zygote
    zygote.close()


@pytest.fixture(scope="session")
def lmcache_host_zygote(lmcache_zygote: Zygote) -> Iterator[HostZygote]:
    """One process for the session that has imported the suite's host, torch and LMCache
    (a fork of :func:`lmcache_zygote` that imports the host's modules, made at the first
    host); each Python host of :func:`lmcache_hosts` is a fork of it (:mod:`host_zygote`)."""
    from kvoffload.conformance.target import remote

    env = remote._python_host()[1]
    env.setdefault("LMCACHE_LOG_LEVEL", "ERROR")  # as lmcache_loader sets it in a host
    zygote = HostZygote(env, lmcache_zygote)
    yield zygote
    zygote.close()


@pytest.fixture
def lmcache_hosts(lmcache_host_zygote: HostZygote, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's Python hosts, for this test, forks of :func:`lmcache_host_zygote`
    (LMCache imported once, not once per host: about 3.5 s of CPU each). For tests whose
    subject is what a host does, not how it starts; the host's own start is tested in
    test_host.py and test_isolation.py. Each host gets the environment the zygote was
    made with (a host's, as the session had it when the fixture was set up), not the
    judge's at its own start."""
    from kvoffload.conformance.target import remote

    real = remote._python_host

    def forked() -> tuple[list[str], dict[str, str]]:
        return lmcache_host_zygote.command(), real()[1]

    monkeypatch.setattr(remote, "_python_host", forked)


@pytest.fixture(scope="session")
def python_host_zygote() -> Iterator[HostZygote]:
    """One process for the session that has imported the suite's host and the reference
    (:data:`host_zygote.PYTHON_PRELOADED`), started at the first host; each Python host
    of :func:`python_hosts` is a fork of it (:mod:`host_zygote`)."""
    from kvoffload.conformance.target import remote

    zygote = HostZygote(remote._python_host()[1], None, PYTHON_PRELOADED)
    yield zygote
    zygote.close()


@pytest.fixture
def python_hosts(python_host_zygote: HostZygote, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's Python hosts, for this test, forks of :func:`python_host_zygote`: a
    host's start-up (an interpreter importing the host, the spec and the reference) paid
    once, not once per host (about 0.1 s of CPU each). As :func:`lmcache_hosts`, for
    tests whose subject is what a target does in its host, with the judge in the test's
    process; the host's own start is tested where the judge is a process of its own
    (test_host.py's :func:`run_check`, test_isolation.py) and by the hosts started early.
    Each host gets the environment the zygote was made with (the session's when a test
    first asked for this fixture), not the judge's at its own start."""
    from kvoffload.conformance.target import remote

    real = remote._python_host

    def forked() -> tuple[list[str], dict[str, str]]:
        return python_host_zygote.command(), real()[1]

    monkeypatch.setattr(remote, "_python_host", forked)


@pytest.fixture(scope="session")
def short_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus without its self-test, its TINY traces up to 4 calls (1,745 of them,
    against 13,218 at the corpus's 6), written once for the session: test_corpus_cpp.py
    and test_lmcache_backends.py replay it and never write to it (a test that breaks a
    case breaks a copy). Writing it costs about 1 s of CPU."""
    from kvoffload.conformance.corpus.corpus_write import write_corpus

    directory = tmp_path_factory.mktemp("short-corpus")
    write_corpus(directory, selftest=False, max_calls=4)
    return directory


@functools.cache
def _no_network_namespace() -> str:
    """Why a process here cannot make a network namespace ('' when it can), probed in
    a child so this process stays where it is."""
    probe = ("from kvoffload.conformance.target.mooncake_cluster import new_network_namespace\n"
             "new_network_namespace()")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=False)
    if done.returncode == 0:
        return ""
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


@pytest.fixture(autouse=True)
def _mooncake_installed(request: pytest.FixtureRequest) -> None:
    """Tests marked ``mooncake`` start a real Mooncake Store (0.3.13.post1): without the
    wheel they skip, and under CI (``CI=true``) they fail, as ``lmcache`` tests do."""
    if request.node.get_closest_marker("mooncake") is None:
        return
    from kvoffload.conformance.target.mooncake_adapter import SUPPORTED, installed_version

    have = installed_version()
    if have not in SUPPORTED:
        reason = (f"Mooncake {SUPPORTED[-1]} is not installed (found {have}): pip install "
                  f"-e '.[mooncake]' and apt-get install libibverbs1")
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (under CI a green run may not hide a missing install)")
        pytest.skip(reason)
    refused = _no_network_namespace()
    if refused:
        # Not an install step: the kernel or the container refuses namespaces. Mooncake
        # binds beyond loopback, so it is never started outside one (docs/engines.md).
        pytest.skip(f"this machine refuses a network namespace ({refused}): Mooncake is "
                    f"only run inside one")
