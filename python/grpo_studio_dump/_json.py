"""Trainer objects (args, configs, meta_info, rewards) → JSON strings for the safetensors metadata."""
import dataclasses
import enum
import json
import math
from collections.abc import Mapping

from ._writer import is_numpy_array, is_torch_tensor


def omegaconf_container(config):
    """OmegaConf.to_container(config, resolve=True) when config is an OmegaConf object, else config."""
    if type(config).__module__.split(".")[0] != "omegaconf":
        return config
    from omegaconf import OmegaConf

    return OmegaConf.to_container(config, resolve=True)


_STRING = object()


def jsonable(x, nan=_STRING, depth=0):
    """Plain JSON values: mappings and objects become dicts, sequences lists, tensors / numpy values their
    lists or numbers, enums their value. A non-finite float becomes `nan` when given (None for a reward no
    function scored: TRL's rewards_per_func null), else the string "NaN" / "Infinity" / "-Infinity" (JSON has
    no such numbers). Anything else becomes str(x)."""
    if depth > 32:
        return str(x)  # a cycle, or nesting no trainer setting has
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        if math.isfinite(x):
            return x
        return nan if nan is not _STRING else ("NaN" if x != x else ("Infinity" if x > 0 else "-Infinity"))
    if isinstance(x, enum.Enum):
        return jsonable(x.value, nan, depth + 1)
    if is_torch_tensor(x) or is_numpy_array(x):
        return jsonable(x.tolist(), nan, depth + 1)
    if type(x).__module__.split(".")[0] == "numpy" and hasattr(x, "item"):
        return jsonable(x.item(), nan, depth + 1)
    if type(x).__module__.split(".")[0] == "omegaconf":
        return jsonable(omegaconf_container(x), nan, depth + 1)
    if isinstance(x, Mapping):
        return {str(k): jsonable(v, nan, depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v, nan, depth + 1) for v in x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: jsonable(getattr(x, f.name), nan, depth + 1) for f in dataclasses.fields(x)}
    if callable(getattr(x, "to_dict", None)):  # transformers TrainingArguments, PretrainedConfig, …
        return jsonable(x.to_dict(), nan, depth + 1)
    if hasattr(x, "__dict__") and not isinstance(x, type) and not callable(x) and type(x).__module__ != "builtins":
        # argparse.Namespace, SimpleNamespace, OpenRLHF's hierarchized args: their public attributes.
        return {str(k): jsonable(v, nan, depth + 1) for k, v in vars(x).items() if not str(k).startswith("_")}
    return str(x)


def dumps(x, nan=_STRING):
    return json.dumps(jsonable(x, nan), allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def ints(x, what):
    """A flat list of ints from a tensor, array or list (ids, sample positions)."""
    v = jsonable(x)
    if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        raise ValueError("%s must be a flat list of integers, got %r" % (what, str(v)[:80]))
    return v
