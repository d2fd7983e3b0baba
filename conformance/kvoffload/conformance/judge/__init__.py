"""The judge: what decides a verdict, in the process the user started.

The spec and the target's adapter are driven one call at a time and each answer
is compared with the spec's (:mod:`.lockstep`, :mod:`.compare`) under the named
properties (:mod:`.properties`); the calls come from one generator
(:mod:`.generator`) through Hypothesis's stateful machine (:mod:`.machine`); a
failing trace is shrunk (:mod:`.shrink`) and explained (:mod:`.explain`); a call
into a target running in this process goes through :mod:`.guard`. The judge is
handed an adapter and never loads a target itself: nothing here imports
:mod:`kvoffload.conformance.target` (tests/conformance/test_layout.py).
"""
