"""The repository keeps its promises: README's commands, CI, the spec's size."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None, "README.md must open with a bash block of two commands"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_the_two_fresh_machine_commands() -> None:
    main_job, tests = readme_commands()[:2]
    assert main_job.startswith("pip install -e .")
    assert "kvoffload" in main_job.split("&&")[1]
    assert tests.startswith("pip install -e '.[test]'")
    assert "pytest" in tests


def test_ci_runs_exactly_the_readme_test_command() -> None:
    tests = readme_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in [line.strip() for line in ci]


def test_every_semantic_decision_is_documented() -> None:
    spec_md = (ROOT / "docs" / "spec.md").read_text()
    cited = set()
    for path in (ROOT / "spec" / "kvoffload" / "spec").glob("*.py"):
        cited |= set(re.findall(r"\bD(\d+)\b", path.read_text()))
    for number in sorted(cited, key=int):
        assert f"**D{number}." in spec_md, f"D{number} is cited in the spec but not in docs"
