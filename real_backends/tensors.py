"""Torch side of the real backend: devices, payload tensors, and the fake nodes' real work.

A fake node's forward on the real backend is real tensor work on the rank's device: a chain of
matmuls (``x <- tanh(x @ W)``) over a working tensor shaped from the size of the node's largest
input (``latents: 512KiB`` gives a ``[2048, 64]`` float32 tensor on CPU, ``[4096, 64]`` bfloat16
on a GPU, BAGEL's latents shape), mixed with that input tensor itself. The chain runs for the
batch's *budget*: the scenario's service time (`FakeNodes.duration`, exactly what the simulation
waits) times ``time_scale``. ``compute_share`` is the part of the budget spent computing; the
rest is slept, so that a CPU with fewer cores than ranks keeps the scenario's timing. At least one
matmul always runs.

Every routed output signal gets a tensor of its declared size (``payloads``), cut from the
result of the work, so tensors of the configured sizes travel between ranks.

Device mapping: ``--device cuda`` puts rank r on ``cuda:(r mod device count)``, so one GPU can
host a whole 3-rank layout.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

from real_backends.wire import Payload
from simharness.scenario.model import Scenario

#: Columns of the working tensor (BAGEL latents are [tokens, 64]).
COLS = 64
MIN_ROWS, MAX_ROWS = 16, 16_384
#: Matmuls between two clock reads (and CUDA synchronisations) inside the budget loop.
CHUNK = 4


def select_device(kind: str, rank: int) -> torch.device:
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device")
        return torch.device("cuda", rank % torch.cuda.device_count())
    raise ValueError(f"--device {kind!r}: expected cpu or cuda")


def tensor_from_payload(p: Payload, device: torch.device) -> torch.Tensor:
    """The tensor a payload frame holds, on `device` (no copy on CPU: it aliases the frame)."""
    with warnings.catch_warnings():
        # The frame's buffer is read-only; the tensor is only ever read.
        warnings.simplefilter("ignore", UserWarning)
        raw = torch.frombuffer(p.buffer, dtype=torch.uint8) if memoryview(p.buffer).nbytes else \
            torch.empty(0, dtype=torch.uint8)
    if p.dtype == "bytes":
        t = raw
    else:
        t = raw.view(getattr(torch, p.dtype)).reshape(p.shape)
    return t if device.type == "cpu" else t.to(device, non_blocking=True)


class FakeWork:
    """Real tensor work for fake nodes on one rank."""

    def __init__(self, scenario: Scenario, device: torch.device, time_scale: float,
                 compute_share: float, seed: int) -> None:
        self.device = device
        self.time_scale = time_scale
        self.compute_share = compute_share
        self.dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
        self.esize = torch.tensor([], dtype=self.dtype).element_size()
        self.gen = torch.Generator().manual_seed(seed)
        self.w = (torch.randn(COLS, COLS, generator=self.gen) / COLS ** 0.5).to(device, self.dtype)
        #: rows -> the starting tensor of a chain with that many rows
        self._x0: dict[int, torch.Tensor] = {}
        self.matmuls = 0
        self.busy_s = 0.0
        self.chunk = 1 if device.type == "cpu" else CHUNK

    def start_tensor(self, nbytes: int) -> torch.Tensor:
        """The working tensor for a node whose largest input has `nbytes`: [rows, 64]."""
        rows = max(MIN_ROWS, min(MAX_ROWS, nbytes // (COLS * self.esize)))
        x = self._x0.get(rows)
        if x is None:
            x = self._x0[rows] = torch.randn(rows, COLS, generator=self.gen).to(self.device, self.dtype)
        return x

    def budget(self, duration_s: float) -> float:
        """Wall seconds a batch of scenario duration `duration_s` takes on this backend."""
        return duration_s * self.time_scale

    def run(self, inputs: list[torch.Tensor], nbytes: int, budget_s: float) -> torch.Tensor:
        """Compute for the batch's budget over a tensor sized from its largest input (`nbytes`);
        return the result (the batch's output data)."""
        t0 = time.perf_counter()
        x = self.start_tensor(nbytes)
        size = x.numel() * x.element_size()
        for inp in inputs:
            if inp.numel() * inp.element_size() >= size:
                flat = inp.reshape(-1).view(torch.uint8)[:size]
                x = x + flat.view(self.dtype).reshape(x.shape).nan_to_num().clamp(-1, 1) * 1e-3
                break
        compute_until = t0 + budget_s * self.compute_share
        cuda = self.device.type == "cuda"
        steps = 0
        while True:
            for _ in range(self.chunk):
                x = torch.tanh(x @ self.w)
            steps += self.chunk
            if cuda:
                torch.cuda.synchronize(self.device)
            if time.perf_counter() >= compute_until:
                break
        self.matmuls += steps
        self.busy_s += time.perf_counter() - t0
        rest = t0 + budget_s - time.perf_counter()
        if rest > 0:
            time.sleep(rest)
        return x

    def payload(self, result: torch.Tensor, nbytes: int) -> torch.Tensor:
        """An output tensor of `nbytes`: cut from the result's bytes, or, when larger than the
        result, a fresh buffer headed by them (filling megabytes per forward would cost more than
        the forward)."""
        raw = result.reshape(-1).view(torch.uint8)
        if nbytes <= raw.numel():
            return raw[:nbytes].clone()
        out = torch.zeros(nbytes, dtype=torch.uint8, device=raw.device)
        out[: raw.numel()] = raw
        return out

    def stats(self) -> dict[str, Any]:
        return {"device": str(self.device), "matmuls": self.matmuls, "busy_s": round(self.busy_s, 4),
                "work_shapes": [[rows, COLS] for rows in sorted(self._x0)],
                "dtype": str(self.dtype).removeprefix("torch.")}
