"""tests/host_zygote.py: a host zygote serves every host the judge starts, whatever
became of the launchers before it (the judge kills a host's launcher on a refusal, a
timeout or a dead channel, often before the forked host has ended).

Its spawner here preloads nothing and the host zygote only the host's modules, not
LMCache: the zygote's serving is the subject, not what it has imported. A host zygote
without a spawner (``python_hosts``, tests/conftest.py) relays how each host ended."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import host_zygote
from host_zygote import HostZygote
from zygote import Zygote


@pytest.fixture(scope="module")
def spawned_host_zygote() -> Iterator[HostZygote]:
    """A host zygote made by a spawner, for this module (as the LMCache host zygote is)."""
    from kvoffload.conformance.target import remote

    spawner = Zygote(preload=())
    zygote = HostZygote(remote._python_host()[1], spawner,
                        preload=("kvoffload.conformance.target.host",))
    yield zygote
    zygote.close()
    spawner.close()


@pytest.fixture
def hosts(spawned_host_zygote: HostZygote, monkeypatch: pytest.MonkeyPatch) -> HostZygote:
    """The judge's Python hosts, for this test, forks of :func:`spawned_host_zygote`."""
    from kvoffload.conformance.target import remote

    real = remote._python_host
    monkeypatch.setattr(remote, "_python_host",
                        lambda: (spawned_host_zygote.command(), real()[1]))
    return spawned_host_zygote


def test_a_launcher_killed_before_its_host_ended_leaves_the_zygote_serving(
    hosts: HostZygote, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Regression: the zygote sent the status of a host whose launcher the judge had
    killed, on that launcher's closed connection; the BrokenPipeError ended the zygote,
    and every later host "exited with status 1 while loading the target"."""
    from kvoffload.conformance.cli import main

    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(0)\n")
    options = ["--max-examples", "3", "--steps", "10", "--seed", "5", "--quiet"]
    # The host refuses the load: the judge kills its launcher while the host still runs.
    assert main(["check", f"{exits}:Target", *options, "--report-dir", str(tmp_path / "a")]) == 2
    assert "raised SystemExit" in capfd.readouterr().err
    reference = tmp_path / "reference.py"
    reference.write_text("from kvoffload.impl import OffloadManager as Target\n")
    assert main(["check", f"{reference}:Target", *options,
                 "--report-dir", str(tmp_path / "b")]) == 0, capfd.readouterr().err


def test_a_forked_host_killed_by_a_signal_is_reported_so(
    python_hosts: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The launcher ends as its host ended: here of the SIGKILL the target sent its
    host (a plain host zygote's fork: :func:`conftest.python_hosts`)."""
    from kvoffload.conformance.cli import main

    kills = tmp_path / "kills.py"
    kills.write_text("import os, signal\nfrom kvoffload.impl import OffloadManager\n"
                     "class Target(OffloadManager):\n"
                     "    def reset_cache(self):\n"
                     "        os.kill(os.getpid(), signal.SIGKILL)\n")
    assert main(["check", f"{kills}:Target", "--max-examples", "20", "--steps", "40",
                 "--seed", "5", "--quiet", "--stop-at-first",
                 "--report-dir", str(tmp_path / "r")]) == 1
    assert "was killed by SIGKILL" in capfd.readouterr().out


def test_a_forked_host_has_the_scratch_folder_the_judge_made_for_it(
    python_hosts: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """As a host the judge starts itself: ``TMPDIR`` is the folder the judge made for
    this host (remote.HostProcess.scratch), not the zygote's, so what the target leaves
    there goes with the host (tests/conformance/test_remote.py)."""
    from kvoffload.conformance.cli import main

    seen = tmp_path / "seen"
    target = tmp_path / "target.py"
    target.write_text("import os, tempfile\nfrom kvoffload.impl import OffloadManager\n"
                      "class Target(OffloadManager):\n"
                      "    def __init__(self, *args, **kwargs):\n"
                      "        super().__init__(*args, **kwargs)\n"
                      f"        with open({str(seen)!r}, 'a') as out:\n"
                      "            out.write(tempfile.gettempdir() + ' '"
                      " + os.environ['KVOFFLOAD_SCRATCH'] + '\\n')\n"
                      "        tempfile.mkstemp(prefix='left-by-target-')\n")
    assert main(["check", f"{target}:Target", "--max-examples", "3", "--steps", "10",
                 "--seed", "5", "--quiet", "--report-dir", str(tmp_path / "r")]) == 0, \
        capfd.readouterr().err
    lines = seen.read_text().split("\n")[:-1]
    assert lines
    for line in lines:
        temp, scratch = line.split()
        assert temp == scratch
        assert Path(temp).name.startswith("kvoffload-host-")
        assert not Path(temp).exists(), "the scratch folder outlived its host"


ENDS = """\
import atexit, sys, threading, time
from kvoffload.impl import OffloadManager


def late():
    time.sleep(0.2)
    print("the thread ended", flush=False)


class Target(OffloadManager):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        atexit.register(sys.stderr.write, "atexit ran, no newline")
        atexit.register(print, "atexit ran", flush=False)
        threading.Thread(target=late).start()
        print("built", flush=False)
"""


@pytest.mark.parametrize(("zygote", "launcher"), [("python_host_zygote", "C"),
                                                  ("python_host_zygote", "Python"),
                                                  ("spawned_host_zygote", "C")])
def test_a_forked_host_ends_as_a_fresh_host_ends(
    zygote: str, launcher: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """After ``bye`` a forked host ends as ``python -m kvoffload.conformance.target.host``
    does (its non-daemon threads joined, the target's exit handlers run, its streams
    flushed, exit status 0), though without the interpreter's teardown
    (tests/python_exit.py): the same answers, output and status. Both kinds of host
    zygote: plain (``python_hosts``) and made by a spawner (as LMCache's hosts are);
    both launchers: host_launcher.c and the Python one used without a C compiler."""
    from kvoffload.conformance.target import remote

    forked: HostZygote = request.getfixturevalue(zygote)
    command = forked.command()
    if launcher == "Python":
        command = [sys.executable, "-S", "-c", host_zygote._LAUNCHER, forked.socket]
    elif shutil.which("cc") is not None:
        assert command == [str(host_zygote.compiled_launcher()), forked.socket]
    target = tmp_path / "target.py"
    target.write_text(ENDS)
    hello = {"request": "hello", "protocol": 1, "target": f"{target}:Target",
             "config": {"capacity": 2}, "python": {"path": sys.path}}
    requests = b"".join(json.dumps(r).encode() + b"\n"
                        for r in (hello, {"request": "new", "capacity": 2}, {"request": "bye"}))
    ended = []
    for argv in (command, [sys.executable, "-m", "kvoffload.conformance.target.host"]):
        done = subprocess.run(argv, input=requests, capture_output=True, cwd=tmp_path,
                              env=remote._python_host()[1], start_new_session=True, timeout=60,
                              check=False)
        ended.append((done.returncode, done.stdout.decode(), done.stderr.decode()))
    assert ended[0] == ended[1]
    status, answers, output = ended[0]
    assert (status, [json.loads(a)["answer"] for a in answers.splitlines()]) == (
        0, ["hello", "built"])
    assert output == "built\nthe thread ended\natexit ran\natexit ran, no newline"
