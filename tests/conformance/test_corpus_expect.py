"""Every ``expect`` of the whole corpus is the spec's answer (slow: 13,441 cases), and
the reading that checks it catches wrong answers (the default tier checks the 3-call
corpus: test_corpus.py)."""

from __future__ import annotations

import pytest
from corpus_expect import spec_disagrees

from kvoffload.conformance.corpus.corpus import engine_cases, scenario_cases
from kvoffload.conformance.corpus.corpus_write import all_cases


def test_a_wrong_expect_is_caught() -> None:
    """The control: an answer changed by hand, a reset's epoch, a held slot."""
    cases = [*scenario_cases(), *engine_cases()]
    assert [d for c in cases if (d := spec_disagrees(c))] == []
    case = next(c for c in cases if c["name"] == "scenario-pr41795")
    case["steps"][1]["expect"]["result"] = "MISS"
    assert spec_disagrees(case) is not None
    reset = next(c for c in cases if any(s["expect"]["kind"] == "reset" for s in c["steps"]))
    next(s for s in reset["steps"] if s["expect"]["kind"] == "reset")["expect"]["epoch"] = 2
    assert spec_disagrees(reset) is not None
    held = next(c for c in cases if any(s["held"] for s in c["steps"]))
    next(s for s in held["steps"] if s["held"])["held"] = []
    assert spec_disagrees(held) is not None


@pytest.mark.slow
def test_every_expect_of_the_whole_corpus_is_the_spec_answer() -> None:
    """Every case ``kvoffload corpus write`` writes (6-call TINY traces)."""
    disagree = [d for c in all_cases() if (d := spec_disagrees(c))]
    assert disagree == []
