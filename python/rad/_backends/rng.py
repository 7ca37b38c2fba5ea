"""Seeds and the counter-based generator shared by every backend (``docs/design.md`` §2, "RNG").

A public call turns its ``rng`` argument into one 64-bit *key*. Kernels never hold a
stateful generator: the ``c``-th uniform of stream ``s`` is a pure function
``uniform(key, s, c)`` (SplitMix64 on a Weyl sequence), so a block of the pool can be
processed by any thread, on any backend, and draw exactly the same numbers.
"""

from __future__ import annotations

from typing import Union

import numpy as np

__all__ = ["GOLDEN", "MASK64", "MERGE_STREAM", "MIX1", "MIX2", "RNG", "key_from_rng", "stream_state", "uniform"]

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
#: Stream id of the final merge of the per-block DepRound leftovers.
MERGE_STREAM = MASK64

#: What public functions accept as ``rng`` (SPEC 7).
RNG = Union[int, np.integer, np.random.Generator, np.random.SeedSequence, None]


def splitmix64(z: int) -> int:
    """One SplitMix64 output for the state ``z`` (all arithmetic modulo 2**64)."""
    z = (z + GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return z ^ (z >> 31)


def stream_state(key: int, stream: int) -> int:
    """The base state of stream ``stream`` (a DepRound block, or :data:`MERGE_STREAM`)."""
    return splitmix64(key ^ splitmix64(stream))


def uniform(state: int, counter: int) -> float:
    """The ``counter``-th uniform in [0, 1) of the stream whose base state is ``state``."""
    z = splitmix64((state + counter * GOLDEN) & MASK64)
    return (z >> 11) * (1.0 / 9007199254740992.0)


def key_from_rng(rng: RNG) -> int:
    """Draw the 64-bit key of one call from ``rng`` (SPEC 7 semantics).

    A ``Generator`` is advanced by one draw; an int, ``SeedSequence`` or ``None`` seeds a
    fresh one, so the same int always gives the same key.
    """
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError("rng must be an int, a numpy Generator, a SeedSequence or None, not bool")
    if rng is not None and not isinstance(
        rng, (int, np.integer, np.random.Generator, np.random.SeedSequence)
    ):
        raise TypeError(
            "rng must be an int, a numpy Generator, a SeedSequence or None, "
            f"not {type(rng).__name__}"
        )
    if isinstance(rng, (int, np.integer)) and rng < 0:
        raise ValueError(f"rng must be a non-negative int seed (or a Generator, SeedSequence or None), got {rng}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return int(gen.integers(0, 1 << 64, dtype=np.uint64, endpoint=False))
