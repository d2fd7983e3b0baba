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


def test_ci_runs_the_wide_tier_the_default_tier_leaves_out() -> None:
    """A test marked `wide` leaves the inner loop, not CI: .ci/run makes the wide tier
    after the README's test command, in the same environment."""
    tests = readme_commands()[1]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    pyproject = (ROOT / "pyproject.toml").read_text()
    addopts = re.search(r"^addopts = (.*)$", pyproject, re.M)
    assert addopts is not None
    assert "not wide" in addopts.group(1)
    assert ci.index("python -m pytest -m wide") > ci.index(tests)
    assert ci.index("python -m pytest -m wide") < ci.index("deactivate")


def test_every_semantic_decision_is_documented() -> None:
    spec_md = (ROOT / "docs" / "spec.md").read_text()
    cited = set()
    for path in (ROOT / "spec" / "kvoffload" / "spec").glob("*.py"):
        cited |= set(re.findall(r"\bD(\d+)\b", path.read_text()))
    for number in sorted(cited, key=int):
        assert f"**D{number}." in spec_md, f"D{number} is cited in the spec but not in docs"


def test_the_oldest_releases_ci_runs_are_the_claimed_lower_bounds() -> None:
    """.ci/oldest.txt pins what .ci/run's second environment installs; each pin must be
    the lower bound pyproject.toml claims, where it claims one."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    claims = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    bounds: dict[str, set[tuple[int, ...]]] = {}
    for claim in claims:
        found = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", claim)
        if found:
            bounds.setdefault(found.group(1).lower(), set()).add(_release(found.group(2)))
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([0-9.]+)$",
                      (ROOT / ".ci" / "oldest.txt").read_text(), re.M)
    assert {name.lower() for name, _ in pins} == {"pytest", "hypothesis", "pytest-xdist"}
    for name, version in pins:
        assert bounds[name.lower()] == {_release(version)}, (
            f"{name}: .ci/oldest.txt pins {version}, pyproject.toml claims "
            f"{sorted(bounds[name.lower()])}")


def _release(version: str) -> tuple[int, ...]:
    """``8.0.0`` and ``8.0`` as one release: (8,)."""
    parts = [int(part) for part in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)
