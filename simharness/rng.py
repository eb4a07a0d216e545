"""Named random streams from one root seed.

Each consumer asks for its own stream by name (``placement``, ``workload``, ``network``, ...), so
adding draws to one stream never shifts another. Streams are numpy Generators seeded from
``SeedSequence([root_seed, crc32(name)])``: stable across runs, platforms and Python hash seeds.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def _numpy():
    # numpy costs a tenth of a second to import; most runs (no replicas to choose, no jitter,
    # no dynamic loops) never draw, so it is imported on the first draw.
    import numpy

    return numpy


class RandomStreams:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams: dict[str, np.random.Generator] = {}

    def stream(self, name: str) -> np.random.Generator:
        gen = self._streams.get(name)
        if gen is None:
            rnd = _numpy().random
            seq = rnd.SeedSequence([self.seed, zlib.crc32(name.encode())])
            gen = self._streams[name] = rnd.Generator(rnd.PCG64(seq))
        return gen

    def choice_index(self, name: str, n: int) -> int:
        return int(self.stream(name).integers(n))


def keyed_draw(seed: int, key: str, dist) -> int:
    """A draw that depends only on the root seed and `key`: every rank and every check that asks
    for the same key gets the same value, without any message carrying it."""
    rnd = _numpy().random
    seq = rnd.SeedSequence([seed, zlib.crc32(key.encode())])
    return dist.draw(rnd.Generator(rnd.PCG64(seq)))


def draw_stop(seed: int, rid: str, partition: str, pass_no: int, loop: str, dist) -> int:
    """The iterations a request's dynamic loop runs in one pass: the same on every rank (as a
    sampled EOS is under seeded sampling), drawn from the root seed and the pass's identity."""
    return keyed_draw(seed, f"stop/{rid}/{partition}/{pass_no}/{loop}", dist)
