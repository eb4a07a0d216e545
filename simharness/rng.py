"""Named random streams from one root seed.

Each consumer asks for its own stream by name (``placement``, ``workload``, ``network``, ...), so
adding draws to one stream never shifts another. Streams are numpy Generators seeded from
``SeedSequence([root_seed, crc32(name)])``: stable across runs, platforms and Python hash seeds.
"""

from __future__ import annotations

import zlib

import numpy as np


class RandomStreams:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams: dict[str, np.random.Generator] = {}

    def stream(self, name: str) -> np.random.Generator:
        gen = self._streams.get(name)
        if gen is None:
            seq = np.random.SeedSequence([self.seed, zlib.crc32(name.encode())])
            gen = self._streams[name] = np.random.Generator(np.random.PCG64(seq))
        return gen

    def choice_index(self, name: str, n: int) -> int:
        return int(self.stream(name).integers(n))
