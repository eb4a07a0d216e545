"""Request kinds from the model's own conductor code.

Which walks a request takes, and in which order, is decided at run time by the model:
``get_initial_forward_pass_args`` picks a partition's first walk from the request's input and
output modalities, and ``get_partition_forward_pass_args`` picks the next walk after each pass
until it says ``request_done``. `derive_steps` drives exactly those two methods for one request
shape (input and output modalities, the defaults in `models.MODEL_DEFAULTS`), the way the
conductor does: placeholder tensor descriptors (no data) stand for the client's inputs, and each
finished walk's persisted outputs join what the next call sees.

A partition whose first answer is already ``request_done`` does not run for that shape (a
text-only request has no Talker). A partition fed by a stream that asks for the same walk again
and again runs it until its stream's final chunk. A partition that does not finish within a few
passes otherwise cannot be derived (a loop decided by tokens the placeholders do not have).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

#: what the API's data worker hands the model per input modality (and what models derive from it)
MODALITY_SIGNALS: dict[str, tuple[str, ...]] = {
    "text": ("text_inputs",),
    "image": ("image_inputs",),
    "audio": ("audio_inputs", "audio_features", "audio_seqlens"),
    "video": ("video_inputs", "video_frames"),
}
MAX_PASSES = 12


class DeriveError(Exception):
    """The model's conductor code did not give a walk sequence for this request shape."""


def _placeholder(name: str) -> Any:
    from mstar.graph.base import TensorPointerInfo

    return TensorPointerInfo(dims=[1, 8], dtype="int64", nbytes=64, address=0, stride=[8, 1],
                             uuid=f"simharness-{name}", source_session_id="simharness",
                             source_entity="simharness")


def derive_steps(model: Any, inputs: tuple[str, ...], outputs: tuple[str, ...],
                 persisted_by: dict[str, set[str]]) -> dict[str, list[Any]]:
    """partition -> its steps (walk names, or ``{walk, until: final_chunk}``) for one shape.

    `persisted_by` maps each walk to the names it persists (they join the conductor's
    persisted signals after the walk)."""
    signals = {s: [_placeholder(s)] for m in inputs for s in MODALITY_SIGNALS.get(m, (m,))}
    partitions = model.get_partitions()
    out: dict[str, list[Any]] = {}
    persisted = dict(signals)
    for part in partitions:
        consumer = bool(part.producer_partitions)
        try:
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                fpa = model.get_initial_forward_pass_args(part.name, list(inputs), list(outputs),
                                                          dict(signals))
                if fpa.request_done:
                    continue
                walks = [fpa.full_metadata.graph_walk]
                meta = fpa.full_metadata
                for _ in range(MAX_PASSES):
                    for name in persisted_by.get(walks[-1], ()):
                        persisted.setdefault(name, [_placeholder(name)])
                    fpa = model.get_partition_forward_pass_args(part.name, meta, dict(persisted), [])
                    if fpa.request_done:
                        break
                    meta = fpa.full_metadata
                    walks.append(meta.graph_walk)
                else:
                    if not (consumer and len(set(walks)) == 1):
                        raise DeriveError(f"partition {part.name!r} does not finish within "
                                          f"{MAX_PASSES} passes ({', '.join(walks)}, ...)")
        except DeriveError:
            raise
        except Exception as exc:
            raise DeriveError(f"partition {part.name!r}: {type(exc).__name__}: {exc}") from None
        if consumer and len(set(walks)) == 1 and len(walks) > 1:
            out[part.name] = [{"walk": walks[0], "until": "final_chunk"}]
        else:
            out[part.name] = walks
    if not out:
        raise DeriveError("no partition runs")
    return out
