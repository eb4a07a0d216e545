"""The wire format: every runtime message round-trips; tensors travel as their own frames."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import msgpack
import msgspec
import pytest

from real_backends import control as ctl
from real_backends import wire
from real_backends.wire import Codec, Payload, WireError
from simharness.placement.layout import Assignment
from simharness.runtime import messages
from simharness.signals import Signal

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def sig(name="latents", nbytes=524288, seq=1) -> Signal:
    return Signal(name, "LLM_cfg_text", False, False, nbytes, "combine_cfg", 0, "image_gen_cfg", 0,
                  12, "node", seq)


def same(a, b) -> bool:
    """Equal and of the same type at every level: a list does not stand in for a tuple, nor an int
    for a float. Signals and message objects (compared by identity) are compared field by field."""
    if type(a) is not type(b):
        return False
    if isinstance(a, msgspec.Struct):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__struct_fields__)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def round_trip(codec: Codec, msg):
    frames = codec.encode(msg)
    return codec.decode(frames[0], frames[1:])


#: a value of its annotated type for every field of a runtime message (by field name; `kv` by class)
SAMPLES = {"rid": "r3", "walk": "image_gen_cfg", "pass_no": 1, "src": 2, "rank": 1, "kind": "t2i",
           "current": {"text": ("LLM_cfg_text", 0), "image": ("image_gen_cfg", 1)},
           "assignment": Assignment({"w#0": (0,), "w#1": (1, 2)}),
           "signals": [sig(), sig("time_index", 16384, 2)], "persist": [sig("new_token", 8)],
           "signal": sig("image_output", 6 << 20), "wgs": ["image_gen_cfg#1"], "emits": 2,
           "source": "leader", "partition": "gen", "loops": ["denoise", "steps"], "node": "LLM",
           "rids": ["r3", "r4"], "number": 7, "label": "kv_text", "tokens": 130,
           "partition_done": True, "new_tokens": 3, "tp_rank": 1,
           "kv": {"kv_text": (0, 130)}, "dst": 1, "nbytes": 5, "msg": None,
           "stop_times": {"denoise": (1, 0, 2)}, "times": {"denoise": (1, 0, 2), "steps": (2,)}}
KV_BY_CLASS = {"WorkerGraphsDoneMsg": {"kv_text": 130}}


def test_every_message_class_round_trips_exactly_as_a_typed_body():
    """Each class of runtime.messages, filled field by field with a value of the field's type,
    comes back equal and of the same types at every level. Every one but `Send` (a command to a
    driver, never sent) travels as a typed body: a field typed ``Any`` would quietly
    move a message off the fast path, and this says so."""
    codec = Codec()
    classes = [c for c in vars(messages).values()
               if isinstance(c, type) and c.__module__ == messages.__name__
               and c.__struct_fields__]  # not the fieldless base, Message
    assert len(classes) >= 8
    for cls in classes:
        obj = cls(**{name: KV_BY_CLASS.get(cls.__name__, SAMPLES["kv"]) if name == "kv"
                     else SAMPLES[name] for name in cls.__struct_fields__})
        frames = codec.encode(obj)
        assert frames[0][1] == (wire.TAGGED if cls is messages.Send else codec.classes.index(cls))
        back = codec.decode(frames[0], frames[1:])
        assert type(back) is cls
        for name in cls.__struct_fields__:
            assert same(getattr(back, name), getattr(obj, name)), (cls.__name__, name)


SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_message_of_a_simulated_run_round_trips_exactly(path, monkeypatch):
    """What the runtimes really send, not only what a test fills in: every message of a simulated
    run of each shipped scenario, under each reference profile, comes back exactly (a field
    holding a list where its annotation says tuple would come back changed, and one holding a
    value of another type would be refused by the receiver)."""
    from simharness.engine.network import Network
    from simharness.run import run_scenario
    from simharness.scenario.loader import load_scenario

    sent: list = []
    original = Network.send_all

    def record(self, src, sends, now):
        sends = list(sends)
        sent.extend(s.msg for s in sends)
        return original(self, src, sends, now)

    monkeypatch.setattr(Network, "send_all", record)
    codec = Codec()
    sc = load_scenario(path)
    kinds = set()
    for runtime in ("mstar-python", "mstar-rust-prefix", "mstar-rust"):
        sent.clear()
        run_scenario(sc, runtime_name=runtime, keep_trace=False)
        assert sent
        for msg in sent:
            kinds.add(type(msg).__name__)
            assert codec.typed_code(type(msg)) is not None, type(msg).__name__
            assert same(round_trip(codec, msg), msg), (runtime, msg)
    assert {"NewRequest", "InputSignals", "WorkerGraphsDoneMsg"} <= kinds


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
    values = msgpack.Unpacker(ext_hook=lambda code, data: None, strict_map_key=False)
    values.feed(meta)
    n, code, body = values  # the frame count, the body byte (here the class code), the body
    assert n == 1 and codec.classes[code] is messages.InputSignals
    # with payload frames a typed body is [message, [[signal ordinal, frame, dtype, shape]...]]
    body, refs = body
    assert body["rid"] == "r0" and refs == [[0, 1, dtype, [4096, 64]]]
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
    remove = codec.classes.index(messages.RemoveRequest)
    inputs = codec.classes.index(messages.InputSignals)

    def typed(n, code, body):
        return msgpack.packb(n) + bytes((code,)) + msgpack.packb(body)

    # typed bodies: each field is checked against its annotation, and the error says where
    with pytest.raises(WireError, match=r"malformed RemoveRequest.*\$\.rid"):
        codec.decode(typed(0, remove, {"rid": ["os", "system"]}))
    with pytest.raises(WireError, match=r"malformed RemoveRequest.*rid"):
        codec.decode(typed(0, remove, {"source": "x"}))
    good = {"rid": "r0", "walk": "w", "pass_no": 0, "src": 0, "signals": []}
    codec.decode(typed(0, inputs, good))
    with pytest.raises(WireError, match=r"malformed InputSignals.*\$\.signals\[0\]"):
        codec.decode(typed(0, inputs, {**good, "signals": [["latents", "LLM"]]}))
    record = ["latents", "LLM", False, False, 8, "x", 0, "w", 0, None, "node", 1, False]
    one = {**good, "signals": [record]}
    assert codec.decode(typed(0, inputs, one)).signals[0].nbytes == 8
    with pytest.raises(WireError, match=r"malformed InputSignals.*\$\.signals\[0\]"):  # one item too many
        codec.decode(typed(0, inputs, {**good, "signals": [[*record, [1, "uint8", [8]]]]}))
    # with payload frames: [message, [[signal ordinal, frame index, dtype, shape], ...]]
    with pytest.raises(WireError, match="payload frame 2 is missing"):
        codec.decode(typed(1, inputs, [one, [[0, 2, "uint8", [8]]]]), [b"x" * 8])
    with pytest.raises(WireError, match=r"malformed InputSignals.*\$\[1\]\[0\]"):
        codec.decode(typed(1, inputs, [one, [[0, 1, "uint8", "x"]]]), [b"x" * 8])
    with pytest.raises(WireError, match="reference to signal 1 of a InputSignals with 1"):
        codec.decode(typed(1, inputs, [one, [[1, 1, "uint8", [8]]]]), [b"x" * 8])
    with pytest.raises(WireError, match="malformed InputSignals"):  # frames follow, no references
        codec.decode(typed(1, inputs, one), [b"x" * 8])
    with pytest.raises(WireError, match="unknown class code"):
        codec.decode(typed(0, 0x7F, {}))
    assert codec.typed_code(ctl.EventBatch) is None  # its events are typed Any
    with pytest.raises(WireError, match="unknown class code"):
        codec.decode(typed(0, codec.classes.index(ctl.EventBatch), {}))
    with pytest.raises(WireError, match="unknown body byte"):
        codec.decode(msgpack.packb(0) + b"\xc1")
    with pytest.raises(WireError, match="no body"):
        codec.decode(msgpack.packb(0))

    # tagged bodies
    def obj(code, *fields):  # an object record as the codec writes one
        return [msgpack.ExtType(wire.OBJECT, b""), code, *fields]

    def tagged(n, body):
        return msgpack.packb(n) + bytes((wire.TAGGED,)) + msgpack.packb(body)

    with pytest.raises(WireError, match="unknown class code"):
        codec.decode(tagged(0, obj(10_000)))
    with pytest.raises(WireError, match="refusing to load"):
        codec.decode(tagged(0, obj("os:system", "true")))
    with pytest.raises(WireError, match="fields for"):
        codec.decode(tagged(0, obj(remove)))
    with pytest.raises(WireError, match="unknown extension"):
        codec.decode(tagged(0, [msgpack.ExtType(99, b""), 1]))
    with pytest.raises(WireError, match="payload frame 1 is missing"):
        codec.decode(tagged(0, [msgpack.ExtType(wire.PAYLOAD, b""), 1, "bytes", []]))
    with pytest.raises(WireError, match="announces 1 payload"):
        codec.decode(tagged(1, "x"))

    # what cannot be encoded is refused at the sender
    with pytest.raises(WireError):
        codec.encode(messages.RemoveRequest(rid=object()))  # type: ignore[arg-type]
    with pytest.raises(WireError):
        codec.encode(ctl.EventBatch(endpoint=0, events=[object()]))


def test_the_one_frame_fast_paths_agree_with_encode_and_decode():
    """The transport sends a control message through `encode_control` and reads one through
    `decode_control`: the same bytes as `encode`, the same message as `decode`, and the same
    refusal of a bad frame, word for word."""
    codec = Codec()
    sent = 0
    for cls in [c for c in vars(messages).values()
                if isinstance(c, type) and c.__module__ == messages.__name__ and c.__struct_fields__]:
        obj = cls(**{name: KV_BY_CLASS.get(cls.__name__, SAMPLES["kv"]) if name == "kv"
                     else SAMPLES[name] for name in cls.__struct_fields__})
        frame = codec.encode_control(obj)
        if cls is messages.Send:  # tagged: the general path
            assert frame is None
            continue
        assert bytes(frame) == codec.encode(obj)[0]
        assert same(codec.decode_control(bytes(frame)), obj)
        sent += 1
    assert sent >= 8
    # with a payload hook, a message whose signals may carry tensors takes the general path
    msg = messages.InputSignals(rid="r0", walk="w", pass_no=0, signals=[sig()], src=0)
    assert codec.encode_control(msg, lambda s: None) is None
    assert codec.encode_control(messages.RemoveRequest(rid="r0"), lambda s: None) is not None
    # ... and one whose signals carry no bytes travels as one frame whatever the hook (it is
    # never asked): the same bytes as the general path, for a list of signals and for one
    asked = []
    def hook(s):
        asked.append(s)
    for quiet in (messages.InputSignals(rid="r0", walk="w", pass_no=0, src=0,
                                        signals=[sig(nbytes=0), sig("time_index", 0, 2)]),
                  messages.ResultTensors(rid="r0", rank=1, signal=sig(nbytes=0)),
                  messages.InputSignals(rid="r0", walk="w", pass_no=0, src=0, signals=[])):
        frame = codec.encode_control(quiet, hook)
        assert frame is not None and bytes(frame) == codec.encode(quiet, hook)[0]
        assert same(codec.decode_control(bytes(frame)), quiet)
    assert not asked
    loud = messages.ResultTensors(rid="r0", rank=1, signal=sig())
    assert codec.encode_control(loud, hook) is None
    assert codec.encode_control(messages.InputSignals(
        rid="r0", walk="w", pass_no=0, src=0, signals=[sig(nbytes=0), sig(seq=2)]), hook) is None
    # the buffer is reused: a second call overwrites the first frame, shorter or longer
    a = bytes(codec.encode_control(messages.RemoveRequest(rid="r1" * 20)))
    b = bytes(codec.encode_control(messages.RemoveRequest(rid="r2")))
    assert codec.decode_control(a).rid == "r1" * 20 and codec.decode_control(b).rid == "r2"
    remove = codec.classes.index(messages.RemoveRequest)
    for bad in (bytes((0, remove)) + msgpack.packb({"rid": ["os", "system"]}),
                bytes((0, 0x7F)) + msgpack.packb({}), b"\x00\xc1", b"\x00",
                bytes((0, wire.TAGGED)) + msgpack.packb([msgpack.ExtType(99, b""), 1])):
        with pytest.raises(WireError) as general:
            codec.decode(bad)
        with pytest.raises(WireError) as fast:
            codec.decode_control(bad)
        assert str(fast.value) == str(general.value)
    with pytest.raises(WireError):
        codec.encode_control(messages.RemoveRequest(rid=object()))  # type: ignore[arg-type]


def test_a_typed_body_does_not_bring_back_a_type_its_annotation_does_not_name():
    """The exact comparison of the tests above can fail: a tuple where the annotation says list
    comes back as a list (so a runtime that starts sending one is caught by the simulated-run
    round trip before it reaches a real run)."""
    msg = messages.StopLoops(rid="r0", partition="p", loops=("denoise",), src=0, pass_no=0)  # type: ignore[arg-type]
    back = round_trip(Codec(), msg)
    assert back.loops == ["denoise"] and not same(back, msg)


def test_the_driver_messages_travel_as_structured_values():
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


def test_plain_data_in_a_tagged_body_comes_back_as_the_same_types():
    """A field typed Any (a batch of trace events, any plain data) travels as a tagged body.
    msgpack has one array type: tuples, sets and frozensets are tagged, lists are not, and maps
    keep non-string keys."""
    from simharness import events as ev

    codec = Codec()
    data = {"t": (1, (2, 3)), "l": [1, [2]], "s": {3, 1, 2}, "f": frozenset({"a", "b"}),
            (0, 1): b"\x00raw", 5: None, "x": 1.5}
    event = ev.Delivered(0.25, 1, "r0", "w", 0, 2, ((sig(), "w#0", "slot"),))
    value = ctl.EventBatch(endpoint=0, events=[data, event, sig()])
    frames = codec.encode(value)
    assert frames[0][1] == wire.TAGGED
    back = codec.decode(frames[0], frames[1:])
    got = back.events[0]
    assert got == data
    assert type(got["t"]) is tuple and type(got["t"][1]) is tuple
    assert type(got["l"]) is list and type(got["s"]) is set
    assert type(got["f"]) is frozenset and type(got[(0, 1)]) is bytes
    assert type(back.events[1]) is ev.Delivered and same(back.events[1], event)
    assert same(back.events[2], value.events[2])


def test_the_transport_reads_what_was_sent_and_refuses_a_bad_frame_in_the_codecs_words(tmp_path):
    """`Transport.drain` decodes the common control message itself, not through the codec's
    `decode`: over a real socket it hands over the same messages, in order, and stops at a bad
    frame with the codec's own refusal, word for word, both for a frame its inline path tries
    (typed, no payload frame) and for one it leaves to the general path."""
    import zmq

    from real_backends.transport import Endpoints, Transport

    ends = Endpoints("ipc", str(tmp_path))
    rx, tx = Transport(1, ends), Transport(0, ends)
    raw = tx.ctx.socket(zmq.PUSH)  # closed before its context, or closing that would block
    try:
        sent = [messages.RemoveRequest(rid="r1"),
                messages.InputSignals(rid="r2", walk="w", pass_no=1, src=0,
                                      signals=[sig(nbytes=0), sig("time_index", 0, 2)]),
                messages.InputSignals(rid="r3", walk="w", pass_no=0, src=0, signals=[sig()])]
        latents = torch.zeros(4, 4)
        for m in sent:
            tx.send(1, m, lambda s: latents)
        got: list = []
        while len(got) < len(sent):
            rx.wait(2000)
            rx.drain(got.append, lambda s, p: None)
        assert all(same(a, b) for a, b in zip(got, sent, strict=True))
        remove = rx.codec.classes.index(messages.RemoveRequest)
        # A receiver that waited for a part that never comes would block: bounded here, so that
        # such a regression fails (zmq.Again) instead of hanging the suite.
        rx.pull.setsockopt(zmq.RCVTIMEO, 2000)
        raw.connect(ends.address(1))
        for bad in (bytes((0, remove)) + msgpack.packb({"rid": ["os", "system"]}),
                    bytes((0, 0x7F)) + msgpack.packb({}), b"\x00", b"",
                    bytes((1, remove)) + msgpack.packb({"rid": "r0"})):
            with pytest.raises(WireError) as expected:
                Codec().decode(bad)
            raw.send(bad)
            assert rx.wait(2000)
            with pytest.raises(WireError) as refused:
                rx.drain(got.append)
            assert str(refused.value) == str(expected.value)
        assert len(got) == len(sent)
    finally:
        raw.close(linger=0)
        tx.close(linger_ms=0)
        rx.close(linger_ms=0)
