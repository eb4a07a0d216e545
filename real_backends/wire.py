"""The wire format of the real backend: one message = one metadata frame + one frame per tensor.

A message object (any class of `simharness.runtime.messages`, the driver's own control
messages in `real_backends.control`, trace events) is turned into *plain data* (tuples, lists,
dicts, strings, numbers, None) and serialised with `marshal` as the metadata frame; every tensor
it carries goes out as its own ZMQ frame, sent from the tensor's buffer. Tensors are never inside
the metadata frame, and the metadata frame can hold nothing but plain data: `marshal` has no way
to name a class or call a function, so a frame from a peer cannot make this process build an
arbitrary object (objects are rebuilt only from the registry below). All processes of a run use
the same interpreter, so `marshal`'s version-specific format is not a concern; it is the fastest
plain-data serialiser in the standard library.

Objects are encoded generically by introspection, so message types added later need no change
here:

* slotted classes (every slot, across the class hierarchy), dataclasses (their init fields) and
  named tuples (their fields) become ``(PLAIN, code, field values)`` when every field is a plain
  value, else ``(MARK, code, encoded field values)``; the code is the class's
  index in a registry built the same way in every process (the classes of the modules in
  `REGISTERED_MODULES`, sorted by name), or its ``module:qualname`` for a class outside it
  (loaded only from the `ALLOWED_PREFIXES` packages);
* a `Signal` carries one more element: its payload reference (or None). The sender's
  ``payload_of(signal)`` hook supplies the payload; the receiver's ``on_payload(signal, payload)``
  hook gets it back. This is how a routed edge and its tensor travel together;
* a `Payload` (or a torch tensor) anywhere in a message becomes ``(MARK, PAYLOAD, frame index,
  dtype, shape)``.

A `Payload` is a buffer (any object with the buffer protocol) plus the dtype name and shape of
the tensor it holds; `real_backends.tensors` turns payloads into torch tensors and back. This
module does not import torch, so processes that only route (the conductor, the launcher) never
load it.
"""

from __future__ import annotations

import dataclasses
import importlib
import marshal
from collections.abc import Callable
from typing import Any

from simharness.runtime.signals import Signal

#: First element of every encoded object; no other tuple in a message starts with bytes.
#: PLAIN: every field is a plain value (decoded without a walk); MARK: fields need decoding.
PLAIN = b"\x00p"
MARK = b"\x00o"
#: Code of an inline payload.
PAYLOAD = -1
REGISTERED_MODULES = (
    "simharness.runtime.messages",
    "simharness.runtime.signals",
    "simharness.placement.layout",
    "simharness.events",
    "real_backends.control",
)
ALLOWED_PREFIXES = ("simharness.", "real_backends.")
_SCALARS = frozenset((str, int, float, bool, type(None), bytes))


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


_is_plain = _SCALARS.__contains__


class Codec:
    """Encodes messages to frames and back. Every process builds one; the registry is the same
    in each because it is derived from the same source."""

    def __init__(self) -> None:
        self.classes: list[type] = _build_registry()
        self._by_type: dict[type, _ClassCodec] = {}
        self._by_code: dict[int | str, _ClassCodec] = {}
        for i, cls in enumerate(self.classes):
            self._add(cls, i)
        self._signal = self._by_type[Signal]

    def _add(self, cls: type, code: int | str) -> _ClassCodec:
        cc = _ClassCodec(cls, code, _fields_of(cls) or ())
        self._by_type[cls] = cc
        self._by_code[code] = cc
        return cc

    # -- encoding -----------------------------------------------------------------------------

    def encode(self, msg: Any, payload_of: PayloadOf | None = None) -> list[Any]:
        """Frames for `msg`: the metadata frame first, then one buffer per payload."""
        frames: list[Any] = [b""]
        body = self._enc(msg, frames, payload_of)
        frames[0] = marshal.dumps((len(frames) - 1, body), 4)
        return frames

    def _enc(self, v: Any, frames: list[Any], payload_of: PayloadOf | None) -> Any:
        t = type(v)
        if t in _SCALARS:
            return v
        if t is list:
            return [self._enc(x, frames, payload_of) for x in v]
        if t is tuple:
            return tuple([self._enc(x, frames, payload_of) for x in v])
        if t is Signal:
            ref = None
            if payload_of is not None:
                p = payload_of(v)
                if p is not None:
                    ref = self._payload_ref(p, frames)
            vals = self._signal.values(v)
            if all(map(_is_plain, map(type, vals))):
                return (PLAIN, self._signal.code, vals, ref)
            return (MARK, self._signal.code, self._enc(vals, frames, payload_of), ref)
        cc = self._by_type.get(t)
        if cc is not None:
            vals = cc.values(v)
            if all(map(_is_plain, map(type, vals))):
                return (PLAIN, cc.code, vals)
            scalars = _SCALARS
            return (MARK, cc.code, tuple([x if type(x) in scalars else self._enc(x, frames, payload_of)
                                          for x in vals]))
        if t is dict:
            return {self._enc(k, frames, payload_of): self._enc(x, frames, payload_of)
                    for k, x in v.items()}
        if t is Payload or _is_tensor(v):
            return self._payload_ref(v, frames)
        if t is set or t is frozenset:
            # Sets travel sorted so both ends see one order; tagged so they come back as sets.
            return (MARK, "set" if t is set else "frozenset",
                    sorted(self._enc(x, frames, payload_of) for x in v))
        self._register(t)
        return self._enc(v, frames, payload_of)

    def _register(self, cls: type) -> _ClassCodec:
        fields = _fields_of(cls)
        if fields is None or not cls.__module__.startswith(ALLOWED_PREFIXES):
            raise WireError(f"cannot send a {cls.__module__}.{cls.__qualname__}: only plain data, "
                            f"slotted classes, dataclasses and named tuples of "
                            f"{' / '.join(ALLOWED_PREFIXES)} travel")
        return self._add(cls, f"{cls.__module__}:{cls.__qualname__}")

    @staticmethod
    def _payload_ref(p: Any, frames: list[Any]) -> tuple[Any, ...]:
        if type(p) is not Payload:
            p = payload_from_tensor(p)
        frames.append(p.buffer)
        return (MARK, PAYLOAD, len(frames) - 1, p.dtype, p.shape)

    # -- decoding -----------------------------------------------------------------------------

    def frame_count(self, meta: bytes) -> tuple[int, Any]:
        """(number of payload frames that follow, undecoded body) of a metadata frame."""
        try:
            n, body = marshal.loads(meta)
        except Exception as exc:
            raise WireError(f"not a metadata frame: {exc}") from None
        if type(n) is not int:
            raise WireError("not a metadata frame: no frame count")
        return n, body

    def decode(self, meta: bytes, payload_frames: list[Any] | tuple[Any, ...] = (),
               on_payload: OnPayload | None = None) -> Any:
        n, body = self.frame_count(meta)
        if n != len(payload_frames):
            raise WireError(f"metadata announces {n} payload frames, {len(payload_frames)} arrived")
        return self.decode_body(body, payload_frames, on_payload)

    def decode_body(self, body: Any, payload_frames: Any, on_payload: OnPayload | None = None) -> Any:
        return self._dec(body, payload_frames, on_payload)

    def _dec(self, v: Any, frames: Any, on_payload: OnPayload | None) -> Any:
        t = type(v)
        if t is tuple:
            if v and type(v[0]) is bytes:
                return self._dec_obj(v, frames, on_payload)
            return tuple([self._dec(x, frames, on_payload) for x in v])
        if t is list:
            return [self._dec(x, frames, on_payload) for x in v]
        if t is dict:
            return {self._dec(k, frames, on_payload): self._dec(x, frames, on_payload)
                    for k, x in v.items()}
        if t is bytes or t in _SCALARS:
            return v
        raise WireError(f"unexpected {t.__name__} in a metadata frame")

    def _dec_obj(self, v: tuple[Any, ...], frames: Any, on_payload: OnPayload | None) -> Any:
        tag, code = v[0], v[1]
        if tag == PLAIN:
            cc = self._by_code.get(code) or self._load(code)
            obj = cc.build(v[2])
        elif tag == MARK:
            if code == PAYLOAD:
                _, _, index, dtype, shape = v
                try:
                    buf = frames[index - 1]
                except (IndexError, TypeError):
                    raise WireError(f"payload frame {index} is missing") from None
                return Payload(getattr(buf, "buffer", buf), dtype, tuple(shape))
            if code == "set" or code == "frozenset":
                items = [self._dec(x, frames, on_payload) for x in v[2]]
                return set(items) if code == "set" else frozenset(items)
            cc = self._by_code.get(code) or self._load(code)
            scalars = _SCALARS
            obj = cc.build(tuple([x if type(x) in scalars else self._dec(x, frames, on_payload)
                                  for x in v[2]]))
        else:
            raise WireError(f"unknown tag {tag!r} in a metadata frame")
        if len(v) == 4 and cc is self._signal:
            ref = v[3]
            if ref is not None and on_payload is not None:
                on_payload(obj, self._dec_obj(ref, frames, on_payload))
        return obj

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
