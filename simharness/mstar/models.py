"""mstar's registered models, built without weights, and the defaults the graphs cannot say.

`build_model(name, options)` imports the model class from ``mstar.model.registry`` (heavy
packages it does not need are stood in for during the import: `stubs`), and creates the object
*without* running its constructor, which downloads a checkpoint: the object gets the attributes
the graph-shaped methods read (``config`` from the model's own config class with its defaults,
or from the model's own ``_load_config`` where that honours ``skip_weight_loading``), the
config's ``model_kwargs`` applied as mstar's constructor applies them, then the user's
``options`` (``--set model.FIELD=VALUE``) on the config.

`MODEL_DEFAULTS` holds, per model, what its graphs do not say and its conductor code decides at
run time: which loops end early (a node's ``check_stop``: EOS), how many iterations they run in
the simulation, and which request kinds a user sends. These are *defaults to edit*: the imported
scenario marks them as such.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import Struct

from simharness.errors import ScenarioError, UsageError
from simharness.mstar.package import EXTRA_INSTALL
from simharness.mstar.stubs import stubbed_imports
from simharness.wording import hint

#: registry name -> (config module, config class or factory, its arguments): the model's config
#: with the defaults of its own config code (what a checkpoint's config.json would override)
CONFIG_CLASSES: dict[str, tuple[str, str, tuple[Any, ...]]] = {
    "bagel": ("mstar.model.bagel.config", "load_bagel_config", ({},)),
    "higgs_audio": ("mstar.model.higgs_audio.config", "HiggsAudioModelConfig", ()),
    "orpheus": ("mstar.model.orpheus.config", "OrpheusModelConfig", ()),
    "qwen3_omni": ("mstar.model.qwen3_omni.config", "Qwen3OmniModelConfig", ()),
    "qwen3_tts": ("mstar.model.qwen3_tts.config", "Qwen3TTSModelConfig", ()),
    "wan22": ("mstar.model.wan22.config", "Wan22Config", ()),
    "whisper_large": ("mstar.model.whisper.config", "WhisperModelConfig", ()),
}
#: models whose own ``_load_config`` uses the config class defaults under skip_weight_loading
#: (and applies the yaml's model_kwargs itself); value: its arguments
SELF_LOADING: dict[str, tuple[Any, ...]] = {
    "cosmos3": (), "cosmos3_droid": (), "cosmos3_super": (), "pi05": (),
    "vjepa2": ("masked", None), "vjepa2_ac": ("ac", None),
}


class DynamicLoop(Struct, frozen=True):
    """A loop that a body node's ``check_stop`` ends (EOS): who stops it, and the default draw."""

    by: tuple[str, ...]
    iterations: tuple[int, int] = (8, 24)


class Shape(Struct, frozen=True):
    """A request shape: the modalities a user sends and asks for (mstar's request fields). The
    walks such a request takes are derived from the model's conductor code (`derive`)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


class ModelDefaults(Struct, frozen=True):
    #: loop name -> how it ends early
    dynamic_loops: dict[str, DynamicLoop] = msgspec.field(default_factory=dict)
    #: request kind -> its shape
    requests: dict[str, Shape] = msgspec.field(default_factory=dict)
    note: str = ""


_DECODE = DynamicLoop(("LLM",))
_T, _I, _A, _V = "text", "image", "audio", "video"
MODEL_DEFAULTS: dict[str, ModelDefaults] = {
    "bagel": ModelDefaults(
        {"decode_loop": _DECODE},
        {"t2i": Shape((_T,), (_I,)), "chat": Shape((_T,), (_T,)), "vqa": Shape((_T, _I), (_T,))},
        "image_gen is image_gen_cfg where the config places LLM_cfg_text (BagelModel."
        "get_worker_graphs)"),
    "orpheus": ModelDefaults({"decode_loop": _DECODE}, {"tts": Shape((_T,), (_A,))}),
    "higgs_audio": ModelDefaults({"decode_loop": _DECODE},
                                 {"stt": Shape((_A,), (_T,)), "chat": Shape((_T,), (_T,))}),
    "whisper_large": ModelDefaults({"decode_loop": DynamicLoop(("decoder",))},
                                   {"asr": Shape((_A,), (_T,))}),
    "pi05": ModelDefaults({}, {"act": Shape((_T, _I), ("action",))}),
    "wan22": ModelDefaults({}, {"t2v": Shape((_T,), (_V,)), "i2v": Shape((_T, _I), (_V,))}),
    "vjepa2": ModelDefaults({"rollout_loop": DynamicLoop(("rollout_predictor",))},
                            {"embed": Shape((_V,), ("embedding",))}),
    "vjepa2_ac": ModelDefaults({"rollout_loop": DynamicLoop(("rollout_predictor",))},
                               {"embed": Shape((_V,), ("embedding",))}),
    "cosmos3": ModelDefaults({}, {"t2i": Shape((_T,), (_I,)), "t2v": Shape((_T,), (_V,))}),
    "cosmos3_droid": ModelDefaults({}, {"t2v": Shape((_T,), (_V,))}),
    "cosmos3_super": ModelDefaults({}, {"t2i": Shape((_T,), (_I,)), "t2v": Shape((_T,), (_V,))}),
    "qwen3_omni": ModelDefaults(
        {"thinker_decode_loop": DynamicLoop(("Thinker",)), "talker_decode_loop": DynamicLoop(("Talker",))},
        {"chat": Shape((_T,), (_T,)), "speech": Shape((_T,), (_T, _A))}),
    "qwen3_tts": ModelDefaults({"talker_decode_loop": DynamicLoop(("Talker",))},
                               {"tts": Shape((_T,), (_A,))}),
}


#: model module -> the stand-ins its first import in this process used
_STUBBED_BEFORE: dict[str, tuple[str, ...]] = {}


def registry() -> dict[str, tuple[str, str]]:
    """mstar's ``MODEL_REGISTRY``: registry name -> (module, class)."""
    from mstar.model.registry import MODEL_REGISTRY

    return dict(MODEL_REGISTRY)


@dataclass
class BuiltModel:
    name: str
    model: Any
    #: heavy packages stood in for while importing the model's module
    stubbed: tuple[str, ...]
    #: options that were applied to the config
    options: dict[str, Any]


def model_class(name: str) -> tuple[Any, tuple[str, ...]]:
    try:
        reg = registry()
    except Exception as exc:
        raise UsageError(f"mstar's model registry does not import here ({type(exc).__name__}: {exc}); "
                         f"install the mstar extra: {EXTRA_INSTALL}") from None
    if name not in reg:
        raise UsageError(f"unknown mstar model {name!r}{hint(name, reg)} "
                         f"(registered: {', '.join(sorted(reg))})")
    module, cls_name = reg[name]
    with stubbed_imports() as used:
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except Exception as exc:
            raise UsageError(f"mstar model {name!r} ({module}) does not import here even with "
                             f"stand-ins for {', '.join(used) or 'nothing'}: "
                             f"{type(exc).__name__}: {exc}") from None
    # A second import of a module is a cache hit: report what its first import stood in for.
    stubbed = _STUBBED_BEFORE.setdefault(module, tuple(used))
    return cls, stubbed


def build_model(name: str, model_kwargs: dict[str, Any] | None = None,
                options: dict[str, Any] | None = None, where: str = "model") -> BuiltModel:
    """The registered model `name`, created without weights (see the module docstring);
    `where` is the key path under which `options` were given (``model`` for import-mstar's
    ``--set model.FIELD``, ``graph.mstar_options`` in a scenario)."""
    from mstar.model.registry import HF_MODELS

    cls, stubbed = model_class(name)
    model = cls.__new__(cls)
    kwargs = dict(model_kwargs or {})
    # What the constructors set before they read anything from a checkpoint.
    model.model_path_hf = HF_MODELS.get(name, {}).get("model_path_hf", "")
    model.cache_dir = None
    model.skip_weight_loading = True
    model._yaml_config_overrides = dict(kwargs)
    model._repo_dir = None
    model._submodule_cache = {}
    if name in SELF_LOADING:
        model.config = model._load_config(*SELF_LOADING[name])
    elif name in CONFIG_CLASSES:
        module, factory, args = CONFIG_CLASSES[name]
        config = getattr(importlib.import_module(module), factory)(*args)
        _apply(config, kwargs, "model_kwargs", strict=False)
        model.config = config
    else:
        raise UsageError(f"simharness does not know how to build mstar model {name!r} without "
                         f"weights yet (known: {', '.join(sorted(CONFIG_CLASSES | SELF_LOADING))})")
    _apply(model.config, options or {}, where, strict=True)
    return BuiltModel(name, model, stubbed, dict(options or {}))


def _apply(config: Any, values: dict[str, Any], where: str, strict: bool) -> None:
    fields = {f.name for f in dataclasses.fields(config)} if dataclasses.is_dataclass(config) else set()
    for key, value in values.items():
        if key not in fields:
            if strict:
                raise ScenarioError(f"{where}.{key}", f"{type(config).__name__} has no field {key!r}"
                                                      f"{hint(key, fields)} "
                                                      f"(fields: {', '.join(sorted(fields))})")
            continue
        setattr(config, key, value)
