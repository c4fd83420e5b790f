"""Tensors → a safetensors file, with torch + safetensors when installed, else the bundled writer.

The layout (what GRPO Studio's src/io/safetensors.ts reads): an 8-byte little-endian header length, a JSON
header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with spaces
to a multiple of 8, then the raw little-endian bytes of each tensor. The bundled writer takes torch tensors,
numpy arrays and plain (nested, rectangular) Python lists: a list of bools is BOOL, of ints I64, of numbers
with a float among them F64 (a Python float is a double: kept exactly).

GRPO_STUDIO_DUMP_PURE=1 forces the bundled writer and never imports torch, numpy or safetensors unless a
value is already one of their objects.
"""
import array
import json
import os
import struct
import sys

PURE_ENV = "GRPO_STUDIO_DUMP_PURE"


def pure():
    """True when GRPO_STUDIO_DUMP_PURE asks for the bundled writer (any value but "", "0", "false")."""
    return os.environ.get(PURE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _module_of(x):
    return type(x).__module__.split(".")[0]


def is_torch_tensor(x):
    return _module_of(x) == "torch" and hasattr(x, "dtype") and hasattr(x, "detach")


def is_numpy_array(x):
    return _module_of(x) == "numpy" and hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "tobytes")


def _list_shape(x, where):
    """Shape of a rectangular nested list of numbers / bools, or None when x is not one."""
    if not isinstance(x, (list, tuple)):
        return None
    shape = [len(x)]
    if not x:
        return shape
    subs = [_list_shape(v, where) for v in x]
    if all(s is None for s in subs):
        return shape if all(isinstance(v, (bool, int, float)) for v in x) else None
    if any(s is None for s in subs) or any(s != subs[0] for s in subs):
        raise ValueError("%s: a ragged list (rows of different lengths) is not a tensor: pad it first" % where)
    return shape + subs[0]


def is_tensor(x):
    """A torch tensor, a numpy array (not of objects) or a rectangular nested list of numbers."""
    if is_torch_tensor(x):
        return True
    if is_numpy_array(x):
        return x.dtype.kind in "biuf"
    try:
        return _list_shape(x, "value") is not None
    except ValueError:
        return True  # a ragged list is meant as a tensor: the writer names it


def _flatten(x):
    out = []
    stack = [x]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


_TORCH_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64", "int32": "I32",
                 "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL", "uint16": "U16", "uint32": "U32", "uint64": "U64"}
_NUMPY_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32", "int16": "I16",
                 "int8": "I8", "uint8": "U8", "bool": "BOOL", "uint16": "U16", "uint32": "U32", "uint64": "U64"}


def encode(name, x):
    """(dtype, shape, little-endian bytes) of one tensor-like value."""
    if is_torch_tensor(x):
        t = x.detach().cpu().contiguous()
        dtype = _TORCH_DTYPES.get(str(t.dtype).replace("torch.", ""))
        if dtype is None:
            raise TypeError("%s: dtype %s cannot be saved" % (name, t.dtype))
        import torch  # already imported: x is a torch tensor

        flat = t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)
        try:
            data = flat.numpy().tobytes() if t.numel() else b""
        except Exception:  # torch without numpy
            data = bytes(flat.tolist()) if t.numel() else b""
        if sys.byteorder != "little" and t.element_size() > 1:
            raise ValueError("%s: big-endian host: save with the safetensors package" % name)
        return dtype, list(t.shape), data
    if is_numpy_array(x):
        a = x
        dtype = _NUMPY_DTYPES.get(a.dtype.name)
        if dtype is None:
            raise TypeError("%s: numpy dtype %s cannot be saved" % (name, a.dtype))
        return dtype, list(a.shape), a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    if isinstance(x, (bool, int, float)):
        dtype, _, data = encode(name, [x])
        return dtype, [], data
    shape = _list_shape(x, name)
    if shape is None:
        raise TypeError("%s: %s is not a tensor (torch, numpy or a nested list of numbers)" % (name, type(x).__name__))
    flat = _flatten(x)
    if all(isinstance(v, bool) for v in flat):
        return "BOOL", shape, bytes(int(v) for v in flat)
    if all(isinstance(v, int) for v in flat):  # bools among ints count as 0 / 1
        bad = next((v for v in flat if not -(2 ** 63) <= v < 2 ** 63), None)
        if bad is not None:
            raise ValueError("%s: %d does not fit int64" % (name, bad))
        a = array.array("q", [int(v) for v in flat])
        dtype = "I64"
    else:
        a = array.array("d", [float(v) for v in flat])
        dtype = "F64"
    if sys.byteorder != "little":
        a.byteswap()
    return dtype, shape, a.tobytes()


def save_bundled(tensors, path, metadata=None):
    """The bundled safetensors writer (no dependency)."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("metadata values must be str, got %r: %s" % (k, type(v).__name__))
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name in sorted(tensors):
        dtype, shape, data = encode(name, tensors[name])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * ((8 - len(raw) % 8) % 8)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def _safetensors_save_file():
    if pure():
        return None
    try:
        from safetensors.torch import save_file
    except ImportError:
        return None
    return save_file


def save(tensors, path, metadata=None):
    """Write `tensors` ({name: tensor-like}) and string metadata to `path`; returns which writer was used."""
    path = os.fspath(path)
    save_file = _safetensors_save_file()
    if save_file is not None and tensors and all(is_torch_tensor(t) for t in tensors.values()):
        # A private contiguous CPU copy of each: safetensors refuses tensors that share memory.
        save_file({k: t.detach().to("cpu", copy=True).contiguous() for k, t in tensors.items()}, path, metadata=metadata)
        return "safetensors"
    save_bundled(tensors, path, metadata)
    return "bundled"
