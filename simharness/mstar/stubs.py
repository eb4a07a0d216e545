"""Stand-ins for heavy packages that mstar's model modules import but their graph code never uses.

A model module of mstar-ai imports its tokenizer (transformers), its image and hub helpers
(PIL, huggingface_hub, torchvision), its weight readers (safetensors) and CUDA-only kernels
(flashinfer) at module level. Building the model's graphs needs none of them. `stubbed_imports`
puts a stand-in in place of each such package that is *not installed*, for the duration of the
import only: afterwards the stand-ins leave ``sys.modules`` and the import system, and the caller
gets the list of what was stood in for, to tell the user. A package that is installed is always
the real one.

A stand-in module answers every attribute with a stand-in class, so ``from transformers import
AutoTokenizer``, ``class BagelTokenizer(PreTrainedTokenizer)`` and ``ACT2FN["gelu"]`` at module
level all work; calling anything of it at graph-building time would be a bug in the import, and
shows as a plain error naming the stand-in.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator

#: Packages mstar's model modules import at module level and their graph code does not use.
HEAVY = ("transformers", "huggingface_hub", "safetensors", "PIL", "torchvision", "torchaudio",
         "torchcodec", "einops", "flashinfer", "diffusers", "librosa", "soundfile", "accelerate", "regex",
         "tokenizers", "sentencepiece")


class _StandInMeta(type):
    """The class of stand-in classes: any attribute, item or call yields another stand-in."""

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{cls.__qualname__}.{name}")

    def __getitem__(cls, key):
        return _stand_in(f"{cls.__qualname__}[{key!r}]")

    def __call__(cls, *args, **kwargs):
        return cls

    def __iter__(cls):
        return iter(())


def _stand_in(name: str) -> type:
    return _StandInMeta(name.rsplit(".", 1)[-1], (), {"__qualname__": name, "__module__": "stand-in"})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stand_in(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots
        #: the stood-in packages something actually imported, in first-import order
        self.used: list[str] = []

    def find_spec(self, fullname, path, target=None):
        root = fullname.split(".")[0]
        if root in self.roots:
            if root not in self.used:
                self.used.append(root)
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module) -> None:
        pass


def missing_heavy() -> tuple[str, ...]:
    """The heavy packages that are not installed here."""
    out = []
    for root in HEAVY:
        try:
            if importlib.util.find_spec(root) is None:
                out.append(root)
        except (ImportError, ValueError):
            out.append(root)
    return tuple(out)


@contextlib.contextmanager
def stubbed_imports() -> Iterator[list[str]]:
    """Stand in for every missing heavy package while the body imports; yields the list of those
    the body imported (filled in as it runs)."""
    roots = missing_heavy()
    finder = _Finder(roots)
    sys.meta_path.insert(0, finder)
    try:
        yield finder.used
    finally:
        sys.meta_path.remove(finder)
        for name in [m for m in sys.modules if m.split(".")[0] in roots]:
            if isinstance(sys.modules[name], _StandInModule):
                del sys.modules[name]
