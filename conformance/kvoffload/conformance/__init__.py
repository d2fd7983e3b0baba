"""kvoffload.conformance: check any engine's offloading manager against the spec."""
