"""``kvoffload traffic``: its reports, JSON, progress display, usage errors (exit 2) and
interruption (exit 130)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kvoffload.conformance.cli import main
from kvoffload.conformance.traffic import command

SMALL = ["--limit", "300", "--no-progress"]


def test_run_prints_both_engines_and_writes_json(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["traffic", "run", "conversation", "--capacity-blocks", "400",
                 "--store-ms", "50", "--load-ms", "5", "--json", str(out), *SMALL]) == 0
    text = capsys.readouterr().out
    assert "tri-state" in text
    assert "two-state" in text
    assert "prefix hit rate, blocks" in text
    assert "pre-PR-#41795" in text
    runs = json.loads(out.read_text())["runs"]
    assert [r["lookup"] for r in runs] == ["tri-state", "two-state"]
    assert runs[0]["capacity_blocks"] == 400
    assert runs[0]["timing"]["store_ms"] == 50
    figures = runs[1]["figures"]
    assert figures["requests"] == 300
    assert figures["bytes_twice"] == figures["duplicate_stores"] * 167_772_160


def test_run_capacity_in_tokens_and_infinite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traffic", "run", "synthetic", "--capacity-tokens", "1M", *SMALL]) == 0
    assert "1,953 blocks (999,936 tokens)" in capsys.readouterr().out
    assert main(["traffic", "run", "synthetic", "--capacity-tokens", "inf", "--policy",
                 "arc", *SMALL]) == 0
    assert "ARC" in capsys.readouterr().out


def test_spread_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["traffic", "run", "conversation", "--spread-ms", "1000", "--json",
                 str(out), *SMALL]) == 0
    assert capsys.readouterr().out.startswith("arrivals at one time spread over 1000 ms")
    assert json.loads(out.read_text())["spread_ms"] == 1000


def test_capacity_and_latency_sweeps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traffic", "capacity", "synthetic", "--tokens", "1e5", "inf", "--policy",
                 "lru", "--markdown", *SMALL]) == 0
    text = capsys.readouterr().out
    assert "touch: LRU at done\n" in text
    assert "| capacity, tokens | synthetic LRU |" in text
    assert "| infinite |" in text
    assert main(["traffic", "latency", "conversation", "--capacity-blocks", "500", "--ms",
                 "0", "100", *SMALL]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:1] == ["100"] for line in lines)


def test_capacity_touch_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traffic", "capacity", "synthetic", "--tokens", "1e6", "--touch", "done",
                 *SMALL]) == 0
    assert "touch: LRU at done, ARC at done" in capsys.readouterr().out
    assert main(["traffic", "capacity", "synthetic", "--tokens", "1e6", *SMALL]) == 0
    assert "touch: LRU at done, ARC at arrival" in capsys.readouterr().out


def test_progress_only_when_asked_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traffic", "run", "synthetic", "--limit", "100"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["traffic", "run", "synthetic", "--limit", "100", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "kvoffload traffic: synthetic tri-state: 100/100 requests" in err
    assert "two-state" in err


@pytest.mark.parametrize(("argv", "says"), [
    (["run", "/nowhere/trace.jsonl"], "no trace file '/nowhere/trace.jsonl'"),
    (["run", "synthetic", "--bandwidth", "0"], "--bandwidth must be"),
])
def test_usage_errors_exit_2_with_a_reason(argv: list[str], says: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traffic", *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvoffload traffic: error: ")
    assert says in err


def test_a_bad_json_line_exits_2_naming_the_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "hash_ids": [1]}\n{oops\n')
    assert main(["traffic", "run", str(trace), "--no-progress"]) == 2
    assert f"{trace}:2: not a JSON line" in capsys.readouterr().err


@pytest.mark.parametrize("option", [
    ["--capacity-blocks", "0"], ["--capacity-blocks", "-3"], ["--capacity-tokens", "100"],
    ["--capacity-tokens", "-1e6"], ["--capacity-tokens", "lots"], ["--store-ms", "-1"],
    ["--limit", "0"], ["--capacity-blocks", "5", "--capacity-tokens", "1e6"],
    ["--markdown"],
])
def test_bad_options_exit_2(option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["traffic", "run", "synthetic", *option])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    # argparse names the sub-command for a bad value, the command for an unknown option
    assert "kvoffload traffic run: error:" in err or "unrecognized arguments" in err


def test_interrupted_exits_130(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "simulate", interrupted)
    assert main(["traffic", "run", "synthetic", *SMALL]) == 130
    assert "kvoffload traffic: interrupted" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None,
                    reason="matplotlib is installed")
def test_plot_without_matplotlib_names_the_extra(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traffic", "capacity", "synthetic", "--tokens", "1e6", "--plot",
                 str(tmp_path / "p.png"), *SMALL]) == 2
    assert "pip install 'kvoffload[plot]'" in capsys.readouterr().err


def test_plot_draws_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    picture = tmp_path / "p.png"
    assert main(["traffic", "capacity", "synthetic", "--tokens", "1e6", "inf", "--plot",
                 str(picture), *SMALL]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
