"""How a scenario runs on the zmq backend: `RealOptions`, with its defaults written once.

This module imports nothing but the standard library at import time (no pyzmq, no torch), so
the command line can read the defaults for its ``--help`` (``simharness run --help`` shows
``--time-scale``'s default from here) on a machine without the backend's dependencies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields

#: the part of a batch's budget spent in torch work when ``compute_share`` is not given, by
#: device: on CPU ranks share a few cores with the conductor and the launcher
COMPUTE_SHARE = {"cpu": 0.5, "cuda": 1.0}
#: a field's metadata key: how a help text names its default where the value alone does not
#: (None, or a word that needs saying what it stands for)
DEFAULT_TEXT = "default_text"


@dataclass
class RealOptions:
    """How a scenario runs on the zmq backend.

    ``time_scale``: wall seconds per scenario second; a batch's budget is its service time times
    this. ``compute_share``: the part of a budget spent in torch work, the rest is slept (default
    by device, `COMPUTE_SHARE`). ``deadline_s``: the run deadline; None derives it from the
    scenario (`real_backends.launcher.derive_deadline`).
    ``kill``: a fault to inject, (rank, seconds after the start): the launcher kills that rank
    with SIGKILL, to exercise crash detection (a ``crash`` fault).
    ``slow_ranks``: a fault to inject, rank -> factor (> 0) on the budget of every batch that
    rank runs, as a slower device would (``slow_rank`` faults). Both are carried out as those
    kinds' faults (`real_backends.faults`).
    """

    device: str = "cpu"
    time_scale: float = 0.2
    compute_share: float | None = field(default=None, metadata={DEFAULT_TEXT: ", ".join(
        f"{share:g} on {device}" for device, share in COMPUTE_SHARE.items())})
    endpoints: str = field(default="ipc", metadata={DEFAULT_TEXT: "sockets in a temporary directory"})
    deadline_s: float | None = field(default=None, metadata={
        DEFAULT_TEXT: "derived from a simulation of the scenario, capped by limits.request_timeout_s"})
    startup_timeout_s: float = 180.0
    threads_per_rank: int = 1
    kill: tuple[int, float] | None = None
    slow_ranks: dict[int, float] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    #: called as progress(ready, total, elapsed_s) while the processes start (that takes from
    #: seconds to minutes: each imports torch); once more when all are ready
    progress: Callable[[int, int, float], None] | None = None

    def check(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"--device {self.device!r}: expected cpu or cuda")
        if self.device == "cuda" and not _cuda_available():
            # said here, once, rather than by every rank's process as it starts (a traceback
            # in each log, quoted by the launcher)
            raise ValueError("--device cuda: torch sees no CUDA device here; use --device cpu")
        if not self.time_scale > 0:
            raise ValueError(f"--time-scale must be > 0, got {self.time_scale}")
        if self.compute_share is None:
            self.compute_share = COMPUTE_SHARE[self.device]
        if not 0 < self.compute_share <= 1:
            raise ValueError(f"--compute-share must be in (0, 1], got {self.compute_share}")
        for rank, factor in self.slow_ranks.items():
            if not factor > 0:
                raise ValueError(f"slow rank {rank}: the factor must be > 0, got {factor}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ValueError(f"--deadline must be > 0, got {self.deadline_s}")
        from real_backends.transport import Endpoints  # pyzmq: only for a run that is about to start

        Endpoints(self.endpoints, run_dir="-")


def default_text(name: str) -> str | None:
    """How a help text names the default of field `name`: the field's `DEFAULT_TEXT`, else its
    default value; None for a field with neither (``kill``: no fault unless asked for)."""
    f = next(f for f in fields(RealOptions) if f.name == name)
    if DEFAULT_TEXT in f.metadata:
        return f.metadata[DEFAULT_TEXT]
    return None if f.default is None or f.default is MISSING else str(f.default)


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device in this process (torch imported only to ask)."""
    import torch

    return torch.cuda.is_available()
