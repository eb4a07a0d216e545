"""The wire format of the real backend: one message = one metadata frame + one frame per tensor.

A message object (any class of `simharness.runtime.messages`, the driver's own control
messages in `real_backends.control`, trace events) is serialised as msgpack in the metadata
frame; every tensor it carries goes out as its own ZMQ frame, sent from the tensor's buffer.
Tensors are never inside the metadata frame. Both encodings below decode to nothing but plain
data and the classes of the registry, so a frame from a peer cannot make this process build an
arbitrary object (no pickle, no class named by the peer outside `ALLOWED_PREFIXES`).

The metadata frame is the number of payload frames that follow (a msgpack int), one byte that
says how the body is encoded, then the body. The registry is the classes of the modules in
`REGISTERED_MODULES`, sorted by name, built the same way in every process; a class's *code* is
its index there.

**Typed bodies** (the byte is the class code, below 0x80). A class whose every field has a
concrete type annotation (the runtime's messages, most control messages) is encoded and decoded
by msgspec, in C, from its Struct, dataclass or named-tuple definition: no Python call per
object, and the annotations bring tuples back as tuples. Decoding validates every field against its
annotation, so a malformed frame is refused with the path of the offending field. A `Signal`
inside is a msgspec array-like Struct, so it travels as the array of its fields with no hook.
When the sender's ``payload_of(signal)`` hook gives signals tensors, the body is the pair
``[message, payload references]``, one reference ``[signal ordinal, frame index, dtype, shape]``
per tensor, where the ordinal counts the message's signals in field order; the receiver's
``on_payload(signal, payload)`` hook gets each back with its signal. This is how a routed edge
and its tensor travel together. This is the path of every message on the hot path; its profile
is in docs/performance.md.

**Tagged bodies** (the byte is msgpack's nil, 0xc0). Anything else (a field typed ``Any``, such
as a batch of trace events, or a union of two classes, such as a process's final state) is
msgpack with *tagged arrays*: plain data travels as msgpack's own types; everything else is an
array whose first item is a tag, an empty msgpack extension record (``msgpack.ExtType``) that no
plain value decodes to. msgpack packs the items of a tagged array itself, calling back here for
the objects among them, and calls back once per array when decoding:

* slotted classes (every slot, across the class hierarchy), dataclasses (their init fields),
  msgspec Structs and named tuples (their fields) become ``[OBJECT, code, field values...]``,
  with the registry code, or ``module:qualname`` for a class outside it (loaded only from the
  `ALLOWED_PREFIXES` packages). Objects are encoded generically by introspection, so message
  types added later need no change here;
* a `Signal` is ``[SIGNAL, field values..., payload reference or None]``;
* a `Payload` (or a torch tensor) anywhere in a message becomes ``[PAYLOAD, frame index, dtype,
  shape]``;
* tuples, sets and frozensets are tagged (``TUPLE``, ``SET``, ``FROZENSET``) so that they come
  back as what they were (msgpack has one array type); sets travel sorted, so equal messages
  encode to equal bytes.

A `Payload` is a buffer (any object with the buffer protocol) plus the dtype name and shape of
the tensor it holds; `real_backends.tensors` turns payloads into torch tensors and back. This
module does not import torch, so processes that only route (the conductor, the launcher) never
load it.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import msgpack
import msgspec

from simharness.signals import Signal

ExtType = msgpack.ExtType
#: msgpack extension codes (see the module docstring)
OBJECT, SIGNAL, PAYLOAD, TUPLE, SET, FROZENSET = 1, 2, 3, 4, 5, 6
#: the tag that opens each tagged array: an empty extension record of the code
_TAGS = {code: ExtType(code, b"") for code in (OBJECT, SIGNAL, PAYLOAD, TUPLE, SET, FROZENSET)}
_OBJECT_TAG, _SIGNAL_TAG, _PAYLOAD_TAG = _TAGS[OBJECT], _TAGS[SIGNAL], _TAGS[PAYLOAD]
_TUPLE_TAG, _SET_TAG, _FROZENSET_TAG = _TAGS[TUPLE], _TAGS[SET], _TAGS[FROZENSET]
#: msgpack's ext hook on decoding. ``slice(code, data)`` is a C constructor, so a tag costs no
#: Python call (this runs for nearly every object of every message); a decoded tag is the
#: slice whose ``start`` is the code and whose ``stop`` is the (empty) record data.
_EXT_HOOK = slice
#: the body byte of a tagged body (msgpack's nil); a typed body's byte is its class code
TAGGED = 0xC0
#: class codes that fit the body byte (a positive msgpack fixint)
MAX_TYPED_CODE = 0x7F


REGISTERED_MODULES = (
    "simharness.runtime.messages",
    "simharness.signals",
    "simharness.placement.layout",
    "simharness.events",
    "real_backends.control",
)
ALLOWED_PREFIXES = ("simharness.", "real_backends.")


class WireError(ValueError):
    """A frame that is not a message of this format."""


class Payload:
    """A tensor's bytes on the wire: a buffer plus the dtype name and shape to rebuild it.

    ``dtype`` is a torch dtype name without the ``torch.`` prefix (``float32``, ``bfloat16``,
    ``uint8``) or ``bytes`` for a plain byte string.
    """

    __slots__ = ("buffer", "dtype", "shape")

    def __init__(self, buffer: Any, dtype: str = "bytes", shape: tuple[int, ...] = ()) -> None:
        self.buffer = buffer
        self.dtype = dtype
        self.shape = tuple(shape)

    @property
    def nbytes(self) -> int:
        return memoryview(self.buffer).nbytes

    def __repr__(self) -> str:
        return f"Payload({self.dtype}{list(self.shape)}, {self.nbytes} B)"


#: the sender's hook: the tensor (or `Payload`) a signal carries, or None. It is asked only for
#: a signal whose `nbytes` is not 0: a signal without bytes carries no tensor.
PayloadOf = Callable[[Signal], Any]
OnPayload = Callable[[Signal, Payload], None]


def _fields_of(cls: type) -> tuple[str, ...] | None:
    """The fields that define an instance of `cls`, or None when it is not encodable."""
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return tuple(cls._fields)
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return tuple(cls.__struct_fields__)
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)
    slots: list[str] = []
    slotted = False
    for klass in reversed(cls.__mro__[:-1]):
        if "__slots__" not in klass.__dict__:
            continue
        slotted = True
        own = klass.__dict__["__slots__"]
        if isinstance(own, str):
            own = (own,)
        slots.extend(s for s in own if s not in ("__dict__", "__weakref__") and s not in slots)
    return tuple(slots) if slotted else None


#: msgspec type nodes that hold no Python object of their own
_PLAIN_TYPES = (msgspec.inspect.NoneType, msgspec.inspect.BoolType, msgspec.inspect.IntType,
                msgspec.inspect.FloatType, msgspec.inspect.StrType, msgspec.inspect.BytesType)


def _concrete(t: Any, seen: set[type]) -> bool:
    """Whether msgspec can encode and decode values of type node `t` (from
    `msgspec.inspect.type_info`) by itself: no ``Any``, no class msgspec does not know."""
    mi = msgspec.inspect
    if isinstance(t, _PLAIN_TYPES):
        return True
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        return _concrete(t.item_type, seen)
    if isinstance(t, mi.TupleType):
        return all(_concrete(x, seen) for x in t.item_types)
    if isinstance(t, mi.DictType):
        return _concrete(t.key_type, seen) and _concrete(t.value_type, seen)
    if isinstance(t, mi.UnionType):
        return all(_concrete(x, seen) for x in t.types)
    if isinstance(t, mi.DataclassType | mi.NamedTupleType | mi.StructType):
        if t.cls in seen:
            return True
        seen.add(t.cls)
        return all(_concrete(f.type, seen) for f in t.fields)
    return False


def _typed(cls: type) -> bool:
    """Whether instances of `cls` travel as typed bodies (see the module docstring)."""
    try:
        info = msgspec.inspect.type_info(cls)
        msgspec.msgpack.Decoder(cls)  # refuses what it cannot decode, e.g. a union of two classes
    except (TypeError, ValueError):
        return False
    return _concrete(info, set())


def _build_registry() -> list[type]:
    classes: dict[str, type] = {}
    for modname in REGISTERED_MODULES:
        mod = importlib.import_module(modname)
        for name, obj in vars(mod).items():
            if (isinstance(obj, type) and obj.__module__ == modname and not name.startswith("_")
                    and _fields_of(obj)):
                classes[f"{modname}:{name}"] = obj
    return [classes[k] for k in sorted(classes)]


def _identifier(name: str) -> str:
    if not name.isidentifier():
        raise WireError(f"field {name!r} is not an identifier")
    return name


class _ClassCodec:
    """Encoder and decoder of one class, generated once from its field list (a loop of getattr
    and setattr calls per message would cost several times more)."""

    def __init__(self, cls: type, code: int | str, fields: tuple[str, ...]) -> None:
        self.cls = cls
        self.code = code
        self.fields = fields
        names = [_identifier(f) for f in fields]
        getters = "".join(f"o.{f}, " for f in names)
        ns: dict[str, Any] = {"cls": cls, "new": object.__new__, "setattr": object.__setattr__}
        # values(o): the field values in order.
        src = [f"def values(o):\n    return ({getters})\n"]
        if issubclass(cls, tuple):
            src.append("def build(v):\n    return cls._make(v)\n")
        elif issubclass(cls, msgspec.Struct) or (dataclasses.is_dataclass(cls)
                                                 and "__slots__" not in cls.__dict__):
            args = "".join(f"{f}=v[{i}], " for i, f in enumerate(names))
            src.append(f"def build(v):\n    return cls({args})\n")
        elif getattr(cls, "__setattr__", object.__setattr__) is object.__setattr__:
            body = "".join(f"    o.{f} = v[{i}]\n" for i, f in enumerate(names))
            src.append(f"def build(v):\n    o = new(cls)\n{body}    return o\n")
        else:  # a frozen slotted class refuses plain attribute assignment
            body = "".join(f"    setattr(o, {f!r}, v[{i}])\n" for i, f in enumerate(names))
            src.append(f"def build(v):\n    o = new(cls)\n{body}    return o\n")
        exec("".join(src), ns)  # built from the class's own field names, checked above
        self.values = ns["values"]
        self.build = ns["build"]


class Codec:
    """Encodes messages to frames and back. Every process builds one; the registry is the same
    in each because it is derived from the same source. One codec serves one thread."""

    def __init__(self) -> None:
        self.classes: list[type] = _build_registry()
        self._by_type: dict[type, _ClassCodec] = {}
        self._by_code: dict[int | str, _ClassCodec] = {}
        for i, cls in enumerate(self.classes):
            self._add(cls, i)
        self._signal = self._by_type[Signal]
        self._index = {cls: i for i, cls in enumerate(self.classes)}
        #: class -> its code when it travels as a typed body, None when tagged (filled lazily)
        self._typed_code: dict[type, int | None] = {}
        #: class code -> msgspec decoder of that class (built on first use). A transport reads
        #: it as `control_decoders` to decode the common control message inline.
        self._decoders: dict[int, Any] = {}
        #: class code -> msgspec decoder of ``[message, payload references]`` (built on first use)
        self._pair_decoders: dict[int, Any] = {}
        #: typed class -> its fields that hold signals: (name, holds a list of them)
        self._signal_fields: dict[type, tuple[tuple[str, bool], ...]] = {}
        #: class -> (typed code or None, `_carrier` or None): what `encode_control` asks
        self._control_plans: dict[type, tuple[int | None, Callable[[Any], bool] | None]] = {}
        # No hooks: a typed body holds nothing msgspec does not encode itself (`_typed`).
        self._encoder = msgspec.msgpack.Encoder()
        #: `encode_control`'s frame: no payload frames (0), the class code, then the body
        self._out = bytearray(2)
        # The message being encoded: its payload frames and the sender's payload hook. Set for
        # the length of one `encode` call (msgpack calls `_default` with the object alone).
        self._frames: list[Any] = []
        self._payload_of: PayloadOf | None = None
        # The same for the message being decoded: its payload frames and the receiver's hook.
        self._in_frames: Any = ()
        self._on_payload: OnPayload | None = None
        self._list_hook = self._make_list_hook()
        # strict_types: a tuple or a named tuple is not packed as a plain array but handed to
        # `_default`, so it comes back as what it was.
        self._packer = msgpack.Packer(default=self._default, strict_types=True, use_bin_type=True,
                                      buf_size=4096)

    def _add(self, cls: type, code: int | str) -> _ClassCodec:
        cc = _ClassCodec(cls, code, _fields_of(cls) or ())
        self._by_type[cls] = cc
        self._by_code[code] = cc
        return cc

    # -- encoding -----------------------------------------------------------------------------

    def typed_code(self, cls: type) -> int | None:
        """The code under which instances of `cls` travel as typed bodies, or None when they
        travel as tagged bodies. The same in every process: it depends on the source alone."""
        try:
            return self._typed_code[cls]
        except KeyError:
            pass
        code = self._index.get(cls)
        if code is not None and (code > MAX_TYPED_CODE or not _typed(cls)):
            code = None
        self._typed_code[cls] = code
        return code

    def encode_control(self, msg: Any, payload_of: PayloadOf | None = None) -> bytearray | None:
        """`msg`'s only frame when it is a control message that travels with no payload frame
        (what `encode` would return alone in its list), else None. The frame is written into a
        buffer this codec reuses, so it holds only until the next call: for a sender that hands
        it to zmq at once, with a copy. One allocation and one copy fewer than `encode`.

        A message whose signals carry no bytes travels without payload frames whatever the
        sender's hook (it is asked only for a signal that carries bytes), so it takes this path
        too: the signal-only INPUT_SIGNALS of every routed control edge."""
        plan = self._control_plans.get(type(msg)) or self._control_plan(type(msg))
        code, carries = plan
        if code is None or (carries is not None and payload_of is not None and carries(msg)):
            return None
        buf = self._out
        buf[1] = code
        try:
            self._encoder.encode_into(msg, buf, 2)
        except Exception as exc:  # msgspec's EncodeError, TypeError
            raise WireError(f"cannot encode a {type(msg).__name__}: {exc}") from None
        return buf

    def encode(self, msg: Any, payload_of: PayloadOf | None = None) -> list[Any]:
        """Frames for `msg`: the metadata frame first, then one buffer per payload."""
        one = self.encode_control(msg, payload_of)
        if one is not None:  # the common control message: its frame, copied out of the buffer
            return [bytes(one)]
        code = self.typed_code(type(msg))
        frames: list[Any] = [b""]
        self._frames, self._payload_of = frames, payload_of
        try:
            if code is not None:
                assert payload_of is not None  # without a hook `encode_control` took it
                refs = self._payload_refs(msg, payload_of)
                body = self._encoder.encode((msg, refs) if refs else msg)
            else:
                body = self._packer.pack(msg)
                code = TAGGED
        except WireError:
            raise
        except Exception as exc:  # msgspec's EncodeError, msgpack's TypeError and ValueError
            raise WireError(f"cannot encode a {type(msg).__name__}: {exc}") from None
        finally:
            self._frames, self._payload_of = [], None
        # The frame count (known only now) goes first as its own msgpack value, then the body byte.
        n = len(frames) - 1
        frames[0] = (bytes((n, code)) if n < 0x80 else msgpack.packb(n) + bytes((code,))) + body
        return frames

    def _signals_of(self, cls: type) -> tuple[tuple[str, bool], ...]:
        """The fields of typed class `cls` that hold a `Signal` or a list of them, in order."""
        try:
            return self._signal_fields[cls]
        except KeyError:
            pass
        mi = msgspec.inspect
        found = []
        for f in getattr(msgspec.inspect.type_info(cls), "fields", ()):
            t = f.type
            if isinstance(t, mi.StructType) and t.cls is Signal:
                found.append((f.name, False))
            elif isinstance(t, mi.ListType) and isinstance(t.item_type, mi.StructType) \
                    and t.item_type.cls is Signal:
                found.append((f.name, True))
        fields = self._signal_fields[cls] = tuple(found)
        return fields

    def _control_plan(self, cls: type) -> tuple[int | None, Callable[[Any], bool] | None]:
        """`encode_control`'s facts about `cls`, found once: its typed code (None: tagged) and
        its `_carrier`. One lookup per message, not one per fact."""
        code = self.typed_code(cls)
        plan = self._control_plans[cls] = (code, None if code is None else self._carrier(cls))
        return plan

    def _carrier(self, cls: type) -> Callable[[Any], bool] | None:
        """For typed class `cls`: a function telling whether a signal of a message has bytes
        (None when the class holds no signal), generated once from its signal fields: a loop
        over the field list per message costs twice this."""
        fields = self._signals_of(cls)
        if not fields:
            return None
        body = []
        for name, many in fields:
            name = _identifier(name)
            if many:
                body.append(f"    for s in m.{name}:\n        if s.nbytes:\n            return True\n")
            else:
                body.append(f"    s = m.{name}\n    if s is not None and s.nbytes:\n        return True\n")
        ns: dict[str, Any] = {}
        exec(f"def carries(m):\n{''.join(body)}    return False\n", ns)  # field names checked
        return ns["carries"]

    def _signals_in(self, msg: Any) -> list[Signal]:
        """The signals of a typed message, in field order: what payload ordinals count."""
        out: list[Signal] = []
        for name, many in self._signals_of(type(msg)):
            v = getattr(msg, name)
            if many:
                out.extend(v)
            elif v is not None:
                out.append(v)
        return out

    def _payload_refs(self, msg: Any, payload_of: PayloadOf) -> list[list[Any]]:
        """``[signal ordinal, frame index, dtype, shape]`` for every signal of `msg` the sender's
        hook gives a tensor, appending the tensors as payload frames."""
        refs = []
        for i, sig in enumerate(self._signals_in(msg)):
            if sig.nbytes:
                p = payload_of(sig)
                if p is not None:
                    refs.append([i, *self._frame_ref(p)])
        return refs

    def _default(self, v: Any) -> list[Any]:
        """msgpack's hook for every value it cannot pack itself: a tagged array, whose items
        msgpack then packs in turn (calling this again for the objects among them)."""
        t = type(v)
        if t is Signal:
            ref = None
            if self._payload_of is not None and v.nbytes:
                p = self._payload_of(v)
                if p is not None:
                    ref = self._payload_ref(p)
            return [_SIGNAL_TAG, *self._signal.values(v), ref]
        cc = self._by_type.get(t)
        if cc is not None:
            return [_OBJECT_TAG, cc.code, *cc.values(v)]
        if t is tuple:
            return [_TUPLE_TAG, *v]
        if t is Payload or _is_tensor(v):
            return self._payload_ref(v)
        if t is set or t is frozenset:
            return [_SET_TAG if t is set else _FROZENSET_TAG, *_sorted(v)]
        cc = self._register(t)
        return [_OBJECT_TAG, cc.code, *cc.values(v)]

    def _register(self, cls: type) -> _ClassCodec:
        fields = _fields_of(cls)
        if fields is None or not cls.__module__.startswith(ALLOWED_PREFIXES):
            raise WireError(f"cannot send a {cls.__module__}.{cls.__qualname__}: only plain data, "
                            f"slotted classes, dataclasses, msgspec Structs and named tuples of "
                            f"{' / '.join(ALLOWED_PREFIXES)} travel")
        return self._add(cls, f"{cls.__module__}:{cls.__qualname__}")

    def _frame_ref(self, p: Any) -> list[Any]:
        """Append `p`'s buffer as the next payload frame: ``[frame index, dtype, shape]``."""
        if type(p) is not Payload:
            p = payload_from_tensor(p)
        frames = self._frames
        frames.append(p.buffer)
        return [len(frames) - 1, p.dtype, [*p.shape]]

    def _payload_ref(self, p: Any) -> list[Any]:
        return [_PAYLOAD_TAG, *self._frame_ref(p)]

    # -- decoding -----------------------------------------------------------------------------

    def frame_count(self, meta: bytes) -> tuple[int, int]:
        """(number of payload frames that follow, where the body byte is) of a metadata frame:
        the frame count is a msgpack value of its own, the body byte and the body follow it."""
        if meta and meta[0] < 0x80:  # a positive fixint: the common case, read without a decoder
            return meta[0], 1
        try:
            head = msgpack.Unpacker(None, max_buffer_size=len(meta) + 16)
            head.feed(meta)
            n = head.unpack()
            used = head.tell()
        except Exception as exc:
            raise WireError(f"not a metadata frame: {type(exc).__name__}: {exc}") from None
        if type(n) is not int or n < 0:
            raise WireError("not a metadata frame: no frame count")
        return n, used

    def decode(self, meta: bytes, payload_frames: list[Any] | tuple[Any, ...] = (),
               on_payload: OnPayload | None = None) -> Any:
        """The message of a metadata frame and the payload frames that followed it."""
        n, start = self.frame_count(meta)
        if n != len(payload_frames):
            raise WireError(f"metadata announces {n} payload frames, {len(payload_frames)} arrived")
        return self.decode_body(meta, start, payload_frames, on_payload)

    @property
    def control_decoders(self) -> dict[int, Any]:
        """Class code -> the msgspec decoder of a typed body of that class, for every class
        decoded so far: what `decode_control` tries first. The dict itself, kept up to date."""
        return self._decoders

    def decode_control(self, meta: bytes) -> Any:
        """The message of a metadata frame that announces no payload frames (first byte 0): the
        common control message, decoded in one call. Anything else, and any frame the typed
        decoder refuses, takes `decode_body`'s path, which names what is wrong."""
        dec = self._decoders.get(meta[1]) if len(meta) > 1 else None
        if dec is not None:
            try:
                return dec.decode(meta[2:])
            except Exception:  # decoded again below, for the error's wording
                pass
        return self.decode_body(meta, 1, ())

    def decode_body(self, meta: Any, start: int, payload_frames: Any,
                    on_payload: OnPayload | None = None) -> Any:
        """The message of a metadata frame whose body byte is at `start` (as `frame_count` says),
        with its payload frames."""
        if len(meta) <= start:
            raise WireError("not a metadata frame: no body")
        kind = meta[start]
        body = meta[start + 1:]  # a small copy of bytes is cheaper than a view of them
        # The hooks read the frames and the receiver's hook from the codec. Without payload
        # frames no payload reference can resolve (one would be refused as missing), so the
        # common control message skips setting them.
        stateful = bool(payload_frames)
        if stateful:
            self._in_frames, self._on_payload = payload_frames, on_payload
        try:
            if kind <= MAX_TYPED_CODE:
                if stateful:  # payload frames follow: the body is [message, payload references]
                    msg, refs = (self._pair_decoders.get(kind) or self._pair_decoder(kind)).decode(body)
                    self._attach(msg, refs)
                    return msg
                dec = self._decoders.get(kind) or self._decoder(kind)
                return dec.decode(body)
            if kind == TAGGED:
                return msgpack.unpackb(body, list_hook=self._list_hook, ext_hook=_EXT_HOOK,
                                       strict_map_key=False, raw=False)
            raise WireError(f"not a metadata frame: unknown body byte {kind:#x}")
        except WireError:
            raise
        except msgspec.ValidationError as exc:  # names the field: `... - at `$.signals[0]``
            raise WireError(f"a malformed {self.classes[kind].__name__}: {exc}") from None
        except Exception as exc:
            raise WireError(f"not a metadata frame: {type(exc).__name__}: {exc}") from None
        finally:
            if stateful:
                self._in_frames, self._on_payload = (), None

    def _decoder(self, code: int) -> Any:
        """The msgspec decoder of the class with typed code `code`."""
        if code >= len(self.classes) or self.typed_code(self.classes[code]) != code:
            raise WireError(f"unknown class code {code!r} for a typed body")
        dec = self._decoders[code] = msgspec.msgpack.Decoder(self.classes[code])
        return dec

    def _pair_decoder(self, code: int) -> Any:
        """The msgspec decoder of ``[message, payload references]`` for typed code `code`."""
        cls = self._decoder(code).type
        dec = self._pair_decoders[code] = msgspec.msgpack.Decoder(
            tuple[cls, list[tuple[int, int, str, list[int]]]])  # type: ignore[valid-type]
        return dec

    def _attach(self, msg: Any, refs: list[tuple[int, int, str, list[int]]]) -> None:
        """Hand the receiver's hook each payload with the signal its reference names."""
        signals = self._signals_in(msg)
        for ordinal, index, dtype, shape in refs:
            if not 0 <= ordinal < len(signals):
                raise WireError(f"a payload reference to signal {ordinal} of a "
                                f"{type(msg).__name__} with {len(signals)}")
            p = self._payload_at([index, dtype, shape])
            if self._on_payload is not None:
                self._on_payload(signals[ordinal], p)

    def _payload_at(self, ref: Any) -> Payload:
        """The payload a ``[frame index, dtype, shape]`` reference names."""
        if type(ref) is not list or len(ref) != 3:
            raise WireError("a malformed payload reference")
        index, dtype, shape = ref
        if type(index) is not int or index < 1 or type(dtype) is not str or type(shape) is not list \
                or not all(type(d) is int for d in shape):
            raise WireError("a malformed payload reference")
        try:
            buf = self._in_frames[index - 1]
        except (IndexError, TypeError):
            raise WireError(f"payload frame {index} is missing") from None
        return Payload(getattr(buf, "buffer", buf), dtype, tuple(shape))

    def _make_list_hook(self) -> Callable[[list[Any]], Any]:
        """msgpack's hook for every decoded array: a tagged one becomes its value. msgpack
        decodes inner arrays first, so every field is already decoded. Signals and registered
        objects, nearly everything that travels, are handled inline: this runs once per array
        of every message."""
        by_code = self._by_code
        signal = self._signal
        build_signal, signal_len = signal.build, len(signal.fields) + 2

        def list_hook(v: list[Any]) -> Any:
            if not v or type(v[0]) is not slice:
                return v
            tag = v[0].start
            if tag == SIGNAL:
                if len(v) != signal_len:
                    raise WireError("a malformed signal record")
                sig = build_signal(v[1:-1])
                ref = v[-1]
                if ref is not None and self._on_payload is not None:
                    self._on_payload(sig, ref)
                return sig
            if tag == OBJECT and len(v) > 1:
                cc = by_code.get(v[1]) or self._load(v[1])
                if cc is signal or len(v) - 2 != len(cc.fields):
                    raise WireError(f"an object record of {len(v) - 2} fields for {cc.cls.__name__}")
                return cc.build(v[2:])
            return self._tagged(v)

        return list_hook

    def _tagged(self, v: list[Any]) -> Any:
        """The value of a tagged array other than a signal or an object."""
        tag, data = v[0].start, v[0].stop
        if data != b"":
            raise WireError(f"a malformed record (extension {tag}) in a metadata frame")
        if tag == TUPLE:
            return tuple(v[1:])
        if tag == PAYLOAD:
            if len(v) != 4:
                raise WireError("a malformed payload record")
            return self._payload_at(v[1:])
        if tag == SET:
            return set(v[1:])
        if tag == FROZENSET:
            return frozenset(v[1:])
        raise WireError(f"unknown extension record {tag} in a metadata frame")

    def _load(self, code: Any) -> _ClassCodec:
        if type(code) is not str:
            raise WireError(f"unknown class code {code!r}")
        module, _, qualname = code.partition(":")
        if not module.startswith(ALLOWED_PREFIXES):
            raise WireError(f"refusing to load class {code!r}: not in {ALLOWED_PREFIXES}")
        try:
            obj: Any = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise WireError(f"unknown class {code!r}: {exc}") from None
        if not isinstance(obj, type) or _fields_of(obj) is None:
            raise WireError(f"{code!r} is not an encodable class")
        return self._add(obj, code)


def _sorted(items: Any) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:  # mixed types: any fixed order will do, the receiver rebuilds a set
        return sorted(items, key=repr)


def _is_tensor(v: Any) -> bool:
    return type(v).__module__.startswith("torch") and hasattr(v, "untyped_storage")


def payload_from_tensor(t: Any) -> Payload:
    """A torch tensor's bytes as a payload: host memory, contiguous, viewed as bytes (no copy when
    the tensor already is a contiguous CPU tensor)."""
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.detach().contiguous()
    dtype = str(t.dtype).removeprefix("torch.")
    shape = tuple(t.shape)
    flat = t.reshape(-1)
    import torch  # only reached by a process that already holds a tensor

    raw = flat.view(torch.uint8) if flat.numel() else flat.to(torch.uint8)
    return Payload(raw.numpy(), dtype, shape)
