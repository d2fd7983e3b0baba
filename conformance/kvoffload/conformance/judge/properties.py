"""The properties the suite checks, by stable name.

Reports, report.json, the docs and ``--assume`` discussions quote these names; a
violation always names exactly one of them.
"""

from __future__ import annotations

PROPERTIES: dict[str, str] = {
    "lookup": "lookup answers MISS iff absent, PENDING iff its store is in flight, HIT iff "
              "READY (safe profile: PENDING may read as MISS, never as HIT); vLLM's RETRY "
              "only where the spec says PENDING",
    "store-plan": "prepare_store stores exactly the call's absent keys, once each, in call "
                  "order",
    "rejection": "prepare_store rejects exactly when free slots plus evictable blocks not "
                 "named in the call are too few, and then changes nothing",
    "eviction-choice": "victims are READY, unread, not named in the call, exactly as many "
                       "as needed; at --level exact, the spec's LRU/ARC victims",
    "slots": "slots lie in 0..capacity-1, are never shared by two live blocks or a running "
             "copy, and a load reads the slot its block was stored in",
    "load-plan": "prepare_load pins exactly the call's keys, once each, in call order",
    "completion": "complete_store / complete_load report the keys they applied, released "
                  "and ignored",
    "epochs": "plans and reset_cache report the spec's epoch",
    "tickets": "every plan names its job with an int ticket the manager never issued "
               "before, not even before a reset (the suite maps them one to one onto the "
               "spec's)",
    "events": "replaying take_events gives a subscriber exactly the READY set; a native "
              "Events is the net change since the last take_events",
    "misuse": "a call that breaks a precondition is rejected (typed error; AssertionError "
              "for vLLM targets) and changes nothing; a legal call is never rejected",
    "liveness": "once every running copy has completed, every slot is free or evictable: "
                "nothing leaks",
    "crash": "the target raises nothing except its rejection of misuse",
    "arguments": "a call leaves the caller's list of keys as it was, and an answer stays "
                 "as it was returned (native API; no buffer a later call overwrites)",
}


def describe(prop: str) -> str:
    return PROPERTIES.get(prop, prop)
