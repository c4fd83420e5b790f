# Test-only, dependency-free `safetensors.torch.save_file`: writes the safetensors layout
# (u64 little-endian header length, JSON header with dtype / shape / data_offsets and the string
# __metadata__, then the raw little-endian tensor bytes). Like the real one it refuses non-string
# metadata values and non-contiguous tensors, so a hook that works here works with the real package.
import json
import struct

import torch

_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}


def save_file(tensors, filename, metadata=None):
    header = {}
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata values must be str, got {k!r}: {type(v).__name__}")
        header["__metadata__"] = metadata
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} is not a tensor")
        if not t.is_contiguous():
            raise ValueError(f"{name} is not contiguous")
        data = t.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - (8 + len(raw)) % 8) % 8)
    with open(filename, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)
