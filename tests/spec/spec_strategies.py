"""Hypothesis strategies shared by the spec's property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from kvoffload.spec import COMPLETIONS, Call, Op


def calls(keys: str, max_keys: int, max_ticket: int) -> st.SearchStrategy[Call]:
    """Any call of any operation on keys drawn from ``keys``: at most ``max_keys`` keys
    a call, completions with or without a ticket up to ``max_ticket`` (a load always
    succeeds; a store may fail)."""
    # the strategies are built once, not on every draw (each new one is validated anew)
    names = st.sampled_from(keys)
    ops = st.sampled_from(list(Op))
    key_lists = st.lists(names, max_size=max_keys)
    successes = st.booleans()
    tickets = st.none() | st.integers(0, max_ticket)

    @st.composite
    def call(draw: st.DrawFn) -> Call:
        op = draw(ops)
        if op is Op.LOOKUP:
            return Call(op, (draw(names),))
        if op in (Op.RESET_CACHE, Op.TAKE_EVENTS, Op.FAIL_NODE):
            return Call(op)
        chosen = tuple(draw(key_lists))
        if op in COMPLETIONS:
            success = op is Op.COMPLETE_LOAD or draw(successes)
            ticket = draw(tickets)
            return Call(op, chosen, success=success, ticket=ticket)
        return Call(op, chosen)

    return call()
