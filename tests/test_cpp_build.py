"""The kept C++ builds (cpp_build.py): a change to any input is another build."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cpp_build import build_key, cached_build

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_every_input_changes_the_key(tmp_path: Path) -> None:
    source, header = tmp_path / "a.cpp", tmp_path / "h.hpp"
    source.write_text("int main() { return 0; }\n")
    header.write_text("// header\n")
    first = build_key("g++", ["-O0"], source, header)
    assert build_key("g++", ["-O0"], source, header) == first
    assert build_key("g++", ["-O1"], source, header) != first
    source.write_text("int main() { return 1; }\n")
    assert build_key("g++", ["-O0"], source, header) != first
    source.write_text("int main() { return 0; }\n")
    header.write_text("// another header\n")
    assert build_key("g++", ["-O0"], source, header) != first
    linked = build_key("g++", ["-O0"], source, header, libraries=["-lpthread"])
    assert linked != build_key("g++", ["-O0"], source, header)
    assert linked != build_key("g++", ["-O0", "-lpthread"], source, header)


def test_a_file_the_source_includes_in_quotes_changes_the_key(tmp_path: Path) -> None:
    # replay.cpp and host.cpp include toy.hpp ("..."): their tests name only the JSON
    # header, and a change to the toy alone reran the build kept before it.
    source, header = tmp_path / "a.cpp", tmp_path / "h.hpp"
    (tmp_path / "sub").mkdir()
    toy, deeper = tmp_path / "sub" / "toy.hpp", tmp_path / "sub" / "deeper.hpp"
    source.write_text('#include <vector>\n#include "sub/toy.hpp"\nint main() { return 0; }\n')
    header.write_text("// header\n")
    toy.write_text('#pragma once\n#include "deeper.hpp"\n')
    deeper.write_text("// deeper\n")
    first = build_key("g++", ["-O0"], source, header)
    toy.write_text('#pragma once\n#include "deeper.hpp"\n// changed\n')
    second = build_key("g++", ["-O0"], source, header)
    assert second != first
    deeper.write_text("// deeper, changed\n")
    assert build_key("g++", ["-O0"], source, header) != second


def test_a_kept_build_is_copied_and_a_failing_one_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVOFFLOAD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KVOFFLOAD_NO_BUILD_CACHE", raising=False)
    source, header = tmp_path / "ok.cpp", tmp_path / "h.hpp"
    source.write_text("int main() { return 3; }\n")
    header.write_text("// header\n")
    built = cached_build(["-O0"], source, header, tmp_path / "one")
    (kept,) = (tmp_path / "cache" / "cpp-builds").glob("*/ok")
    made = kept.stat().st_mtime_ns
    again = cached_build(["-O0"], source, header, tmp_path / "two")
    assert again.read_bytes() == built.read_bytes()
    assert kept.stat().st_mtime_ns == made  # copied, not built again
    source.write_text("int main() { return undeclared; }\n")
    with pytest.raises(subprocess.CalledProcessError):
        cached_build(["-O0"], source, header, tmp_path / "three")
    assert len(list((tmp_path / "cache" / "cpp-builds").glob("*/ok"))) == 1
