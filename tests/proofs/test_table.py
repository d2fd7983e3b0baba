"""The README results table: rendering, reading back, rewriting between the markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from proofs.modelcheck import table

ROW = table.Row("a | b", "tool", "TINY", "exhaustive", "holds", "211", "0.6 s",
                "python proofs/check.py --check spec-lru --preset tiny")


def test_rows_survive_a_round_trip(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{table.BEGIN}\nOLDTEXT\n{table.END}\nmiddle\n"
                      f"{table.TRACES_BEGIN}\nOLDTEXT\n{table.TRACES_END}\nend\n")
    table.write([ROW], "trace text", path=readme)
    assert table.read(readme) == [ROW]
    text = readme.read_text()
    assert text.startswith("intro\n")
    assert "middle" in text
    assert text.endswith("end\n")
    assert "trace text" in text
    assert "OLDTEXT" not in text


def test_missing_markers_are_an_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("no table here\n")
    with pytest.raises(ValueError, match="lacks the markers"):
        table.read(readme)
