"""The target's side of the boundary: loading a target and speaking to it.

TARGET strings and the choice of adapter (:mod:`.targets`); the adapters for
the native API, vLLM's three eras, LMCache and Mooncake, with the loaders of
their real code (:mod:`.vllm_wheels`, :mod:`.lmcache_loader`,
:mod:`.mooncake_cluster`); the host program a target runs in (:mod:`.host`,
``python -m kvoffload.conformance.target.host``), the call protocol between the
judge and a host (:mod:`.protocol`, ``protocol_schema.json``, docs/protocol.md),
the judge's end of it (:mod:`.remote`) and the isolation of an in-process run
(:mod:`.isolation`).

For engine-native reproducers, :mod:`.engine_record` writes down the engine
calls an adapter makes; :mod:`.engine_prelude`, :mod:`.lmcache_harness` and
:mod:`.vllm_stubs` are standard-library-only sources a reproducer carries.
"""
