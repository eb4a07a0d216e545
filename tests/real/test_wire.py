"""The wire format: every runtime message round-trips; tensors travel as their own frames."""

from __future__ import annotations

import pickle

import msgpack
import pytest

from real_backends import wire
from real_backends.wire import Codec, Payload, WireError
from simharness.placement.layout import Assignment
from simharness.runtime import messages
from simharness.runtime.signals import Signal

torch = pytest.importorskip("torch")


def sig(name="latents", nbytes=524288, seq=1) -> Signal:
    return Signal(name, "LLM_cfg_text", False, False, nbytes, "combine_cfg", 0, "image_gen_cfg", 0,
                  12, "node", seq)


def fields(obj):
    return {k: getattr(obj, k) for k in type(obj).__slots__}


def same(a, b) -> bool:
    if isinstance(a, Signal):
        return isinstance(b, Signal) and fields(a) == fields(b)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_every_message_class_round_trips_without_knowing_it():
    """Each class of runtime.messages, filled field by field from its __slots__, comes back equal:
    message types added later need no change to the codec."""
    codec = Codec()
    samples = {"rid": "r3", "walk": "image_gen_cfg", "pass_no": 1, "src": 2, "rank": 1,
               "signals": [sig(), sig("time_index", 16384, 2)], "persist": [sig("new_token", 8)],
               "signal": sig("image_output", 6 << 20), "wgs": ["image_gen_cfg#1"], "emits": 2,
               "assignment": Assignment({"w#0": (0,), "w#1": (1, 2)}),
               "dst": 1, "nbytes": 5, "msg": None}
    classes = [c for c in vars(messages).values()
               if isinstance(c, type) and c.__module__ == messages.__name__]
    assert len(classes) >= 8
    for cls in classes:
        obj = cls.__new__(cls)
        for name in cls.__slots__:
            object.__setattr__(obj, name, samples.get(name, f"value of {name}"))
        frames = codec.encode(obj)
        back = codec.decode(frames[0], frames[1:])
        assert type(back) is cls
        for name in cls.__slots__:
            assert same(getattr(back, name), getattr(obj, name)), (cls.__name__, name)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint8"])
def test_a_signal_tensor_travels_as_its_own_frame(dtype):
    codec = Codec()
    t = (torch.arange(4096 * 64) % 251).to(getattr(torch, dtype)).reshape(4096, 64)
    msg = messages.InputSignals(rid="r0", walk="image_gen_cfg", pass_no=0,
                                signals=[sig(), sig("time_index", 0, 2)], src=0)
    frames = codec.encode(msg, lambda s: t if s.name == "latents" else None)
    assert len(frames) == 2
    meta = frames[0]
    assert len(meta) < 1024 < memoryview(frames[1]).nbytes == t.numel() * t.element_size()
    # the metadata frame is plain data (no pickle, no class references) and holds no tensor bytes
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(meta)
    values = msgpack.Unpacker(ext_hook=lambda code, data: None)
    values.feed(meta)
    n, _body = values  # the frame count, then the body
    assert n == 1
    got: list[tuple[Signal, Payload]] = []
    back = codec.decode(meta, [memoryview(frames[1])], lambda s, p: got.append((s, p)))
    assert [s.name for s in back.signals] == ["latents", "time_index"]
    assert len(got) == 1 and got[0][0].name == "latents"
    from real_backends.tensors import tensor_from_payload

    out = tensor_from_payload(got[0][1], torch.device("cpu"))
    assert out.dtype == t.dtype and out.shape == t.shape and torch.equal(out, t)


def test_the_sender_does_not_copy_a_cpu_tensor():
    codec = Codec()
    t = torch.randn(256, 64)
    frames = codec.encode(messages.ResultTensors(rid="r0", rank=0, signal=sig("image_output", t.numel() * 4)),
                          lambda s: t)
    assert memoryview(frames[1]).nbytes == t.numel() * 4
    t[0, 0] = 12345.0  # the frame is a view of the tensor's own buffer
    assert memoryview(frames[1]).cast("f")[0] == 12345.0


def test_bad_frames_are_refused():
    codec = Codec()
    with pytest.raises(WireError):
        codec.decode(pickle.dumps((0, "x")))
    def obj(code, *fields):  # an object record as the codec writes one
        return [msgpack.ExtType(wire.OBJECT, b""), code, *fields]

    def frame(n, body):
        return msgpack.packb(n) + msgpack.packb(body)

    with pytest.raises(WireError, match="unknown class code"):
        codec.decode(frame(0, obj(10_000)))
    with pytest.raises(WireError, match="refusing to load"):
        codec.decode(frame(0, obj("os:system", "true")))
    with pytest.raises(WireError, match="fields for"):
        codec.decode(frame(0, obj(codec.classes.index(messages.RemoveRequest))))
    with pytest.raises(WireError, match="unknown extension"):
        codec.decode(frame(0, [msgpack.ExtType(99, b""), 1]))
    with pytest.raises(WireError, match="payload frame 1 is missing"):
        codec.decode(frame(0, [msgpack.ExtType(wire.PAYLOAD, b""), 1, "bytes", []]))
    with pytest.raises(WireError, match="announces 1 payload"):
        codec.decode(frame(1, "x"))
    with pytest.raises(WireError):
        codec.encode(messages.RemoveRequest(rid=object()))  # type: ignore[arg-type]


def test_the_driver_messages_travel_as_structured_values():
    from real_backends import control as ctl
    from simharness import events as ev
    from simharness.drive.core import ConductorFinal, RankFinal, RequestPosition
    from simharness.runtime.conductor import StallPosition

    codec = Codec()
    pos = StallPosition(walk="w", step=2, pending=(("w/0", (0, 1)),), ranks=(0, 1), walks=("w",))
    node = ev.BlockedNode(1, "w/0", "LLM", 3, (), (), ("latents",), "", (), True)
    for msg in (
        ctl.StallInfo(round=4, requests=[RequestPosition(rid="r0", position=pos),
                                         RequestPosition(rid="r1", position=None)]),
        ctl.BlockedQuery(round=4, rid="r0", position=pos),
        ctl.BlockedReply(round=4, rank=1, rid="r0", blocked=[node]),
        ctl.Final(endpoint=0, state=RankFinal(rank=0, requests_left=("r0",),
                                              unprocessed=(("r1", "remove_request"),), busy=False),
                  stats={"sent": 3}),
        ctl.Final(endpoint=-1, state=ConductorFinal(requests=(), waiting=("r2",))),
        ctl.Shutdown(),
    ):
        frames = codec.encode(msg)
        assert Codec().decode(frames[0], frames[1:]) == msg


def test_plain_data_comes_back_as_the_same_types():
    """msgpack has one array type: tuples, sets and frozensets are tagged, lists are not, and maps
    keep non-string keys."""
    codec = Codec()
    value = messages.InputSignals(rid="r0", walk="w", pass_no=0, signals=[sig()], src=0)
    value.rid = {"t": (1, (2, 3)), "l": [1, [2]], "s": {3, 1, 2}, "f": frozenset({"a", "b"}),
                 (0, 1): b"\x00raw", 5: None, "x": 1.5}  # any plain data travels in any field
    back = codec.decode(*(lambda fr: (fr[0], fr[1:]))(codec.encode(value)))
    assert back.rid == value.rid
    assert type(back.rid["t"]) is tuple and type(back.rid["t"][1]) is tuple
    assert type(back.rid["l"]) is list and type(back.rid["s"]) is set
    assert type(back.rid["f"]) is frozenset and type(back.rid[(0, 1)]) is bytes
    assert same(back.signals, value.signals)
