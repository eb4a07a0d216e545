"""The wire format of the real backend: one message = one metadata frame + one frame per tensor.

A message object (any class of `simharness.runtime.messages`, the driver's own control
messages in `real_backends.control`, trace events) is serialised with msgpack as the metadata
frame; every tensor it carries goes out as its own ZMQ frame, sent from the tensor's buffer.
Tensors are never inside the metadata frame. msgpack is a maintained binary format whose
decoder builds nothing but plain data (numbers, strings, bytes, lists, maps) plus extension
records that this module interprets, so a frame from a peer cannot make this process build an
arbitrary object: objects are rebuilt only from the registry below.

The metadata frame is two msgpack values, one after the other: the number of payload frames
that follow, then the body. Plain data travels as msgpack's own
types; everything else is a *tagged array* whose first item is a tag, an empty msgpack
extension record (``msgpack.ExtType``) that no plain value decodes to. msgpack packs the items of
a tagged array itself, calling back here for the objects among them, so a message is packed in
one pass with no nested buffers, and decoded in one pass with one callback per array:

* slotted classes (every slot, across the class hierarchy), dataclasses (their init fields) and
  named tuples (their fields) become ``[OBJECT, code, field values...]``; the code is the
  class's index in a registry built the same way in every process (the classes of the modules
  in `REGISTERED_MODULES`, sorted by name), or its ``module:qualname`` for a class outside it
  (loaded only from the `ALLOWED_PREFIXES` packages). Objects are encoded generically by
  introspection, so message types added later need no change here;
* a `Signal` is ``[SIGNAL, field values..., payload reference or None]``. The sender's
  ``payload_of(signal)`` hook supplies the payload; the receiver's ``on_payload(signal,
  payload)`` hook gets it back. This is how a routed edge and its tensor travel together;
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

from simharness.runtime.signals import Signal

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


REGISTERED_MODULES = (
    "simharness.runtime.messages",
    "simharness.runtime.signals",
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


PayloadOf = Callable[[Signal], Any]
OnPayload = Callable[[Signal, Payload], None]


def _fields_of(cls: type) -> tuple[str, ...] | None:
    """The fields that define an instance of `cls`, or None when it is not encodable."""
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return tuple(cls._fields)
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
        elif dataclasses.is_dataclass(cls) and "__slots__" not in cls.__dict__:
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

    def encode(self, msg: Any, payload_of: PayloadOf | None = None) -> list[Any]:
        """Frames for `msg`: the metadata frame first, then one buffer per payload."""
        frames: list[Any] = [b""]
        self._frames, self._payload_of = frames, payload_of
        try:
            body = self._packer.pack(msg)
        except (TypeError, ValueError, OverflowError) as exc:
            raise WireError(str(exc)) from None
        finally:
            self._frames, self._payload_of = [], None
        # The frame count (known only now) goes first as its own msgpack value.
        n = len(frames) - 1
        frames[0] = (bytes((n,)) if n < 0x80 else msgpack.packb(n)) + body
        return frames

    def _default(self, v: Any) -> list[Any]:
        """msgpack's hook for every value it cannot pack itself: a tagged array, whose items
        msgpack then packs in turn (calling this again for the objects among them)."""
        t = type(v)
        if t is Signal:
            ref = None
            if self._payload_of is not None:
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
                            f"slotted classes, dataclasses and named tuples of "
                            f"{' / '.join(ALLOWED_PREFIXES)} travel")
        return self._add(cls, f"{cls.__module__}:{cls.__qualname__}")

    def _payload_ref(self, p: Any) -> list[Any]:
        if type(p) is not Payload:
            p = payload_from_tensor(p)
        frames = self._frames
        frames.append(p.buffer)
        return [_PAYLOAD_TAG, len(frames) - 1, p.dtype, [*p.shape]]

    # -- decoding -----------------------------------------------------------------------------

    def frame_count(self, meta: bytes) -> tuple[int, Any]:
        """(number of payload frames that follow, the body) of a metadata frame: the frame count
        and the body are two msgpack values one after the other."""
        if meta and meta[0] < 0x80:  # a positive fixint: the common case, read without a decoder
            return meta[0], memoryview(meta)[1:]
        try:
            head = msgpack.Unpacker(None, max_buffer_size=len(meta) + 16)
            head.feed(meta)
            n = head.unpack()
            used = head.tell()
        except Exception as exc:
            raise WireError(f"not a metadata frame: {type(exc).__name__}: {exc}") from None
        if type(n) is not int or n < 0:
            raise WireError("not a metadata frame: no frame count")
        return n, memoryview(meta)[used:]

    def decode(self, meta: bytes, payload_frames: list[Any] | tuple[Any, ...] = (),
               on_payload: OnPayload | None = None) -> Any:
        """The message of a metadata frame and the payload frames that followed it."""
        n, body = self.frame_count(meta)
        if n != len(payload_frames):
            raise WireError(f"metadata announces {n} payload frames, {len(payload_frames)} arrived")
        return self.decode_body(body, payload_frames, on_payload)

    def decode_body(self, body: Any, payload_frames: Any, on_payload: OnPayload | None = None) -> Any:
        """The message of a body that `frame_count` split off, with its payload frames."""
        self._in_frames, self._on_payload = payload_frames, on_payload
        try:
            return msgpack.unpackb(body, list_hook=self._list_hook, ext_hook=_EXT_HOOK,
                                   strict_map_key=False, raw=False)
        except WireError:
            raise
        except Exception as exc:
            raise WireError(f"not a metadata frame: {type(exc).__name__}: {exc}") from None
        finally:
            self._in_frames, self._on_payload = (), None

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
            _, index, dtype, shape = v
            try:
                buf = self._in_frames[index - 1]
            except (IndexError, TypeError):
                raise WireError(f"payload frame {index} is missing") from None
            return Payload(getattr(buf, "buffer", buf), dtype, tuple(shape))
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
