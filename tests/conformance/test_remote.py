"""What the judge leaves behind a host (:mod:`kvoffload.conformance.target.remote`):
nothing. A host runs with ``TMPDIR`` set to a scratch folder of its own, which the
judge removes once the host's process group has ended, however it ended: after
``bye``, or killed (a call that overran its time, garbage on the channel, the run's end).
A target's temporary files (LMCache's disk backend makes a folder per construction and
removes it in an exit handler, which a killed host never runs) go with its host.
"""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from kvoffload.conformance.target.remote import HostProcess

pytestmark = pytest.mark.skipif(os.name != "posix", reason="hosts need POSIX")

_LITTER = """
    import os, sys, tempfile
    folder = tempfile.mkdtemp(prefix="litter-")
    open(os.path.join(folder, "chunk"), "w").close()
    print(folder, flush=True)
    sys.stdin.read()  # until the judge closes the channel, or kills the group
"""


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder for this process and the hosts it starts (``TMPDIR``)."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    return root


@pytest.mark.parametrize("ending", ["killed", "closed"])
def test_a_hosts_temporary_files_go_with_it(temp_root: Path, ending: str) -> None:
    host = HostProcess([sys.executable, "-c", textwrap.dedent(_LITTER)], None, lifeline=False)
    folder = Path(host.receive_line(30.0, "while starting").decode())
    assert folder.is_dir()
    assert folder.is_relative_to(temp_root)
    assert folder.parent != temp_root, "the host's TMPDIR is a folder of its own"
    if ending == "killed":
        host.kill()
    else:
        host.close()
    assert not folder.exists()
    assert list(temp_root.iterdir()) == []


def test_the_host_is_given_the_environment_asked_for_besides(temp_root: Path) -> None:
    env = {**os.environ, "KVOFFLOAD_TEST_MARK": "kept"}
    script = "import os; print(os.environ['KVOFFLOAD_TEST_MARK'], os.environ['TMPDIR'])"
    host = HostProcess([sys.executable, "-c", script], env, lifeline=False)
    mark, folder = host.receive_line(30.0, "while starting").decode().split()
    host.kill()
    assert mark == "kept"
    assert Path(folder).parent == temp_root
    assert env["TMPDIR"] == str(temp_root), "the caller's environment is left as it was"
    assert "KVOFFLOAD_SCRATCH" not in env


_LEAVES_A_FILE = """
    import tempfile
    from kvoffload.impl import OffloadManager

    class Target(OffloadManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            tempfile.mkstemp(prefix="left-by-target-")
"""


def test_a_check_leaves_no_temporary_file_of_its_targets(
        temp_root: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from kvoffload.conformance.cli import main

    target = tmp_path / "target.py"
    target.write_text(textwrap.dedent(_LEAVES_A_FILE))
    status = main(["check", f"{target}:Target", "--max-examples", "5", "--steps", "10",
                   "--seed", "1", "--no-database", "--quiet",
                   "--report-dir", str(tmp_path / "r")])
    out, err = capfd.readouterr()
    assert status == 0, out + err
    assert list(temp_root.iterdir()) == []


def test_a_tmpdir_where_no_folder_can_be_made_is_a_load_error(
        temp_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that cannot make its host's scratch folder could not be made (exit 2, the
    reason in a line), not an internal error."""
    from kvoffload.conformance.errors import TargetLoadError

    missing = temp_root / "missing"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    with pytest.raises(TargetLoadError, match="cannot make a scratch folder for the host"):
        HostProcess([sys.executable, "-c", "pass"], None, lifeline=True)
    assert list(temp_root.iterdir()) == []
