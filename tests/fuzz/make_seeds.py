#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: one valid file of each kind
and a few near-valid ones (a wrong length, dtype, shape or offset), so that
the fuzzer starts next to the checks it should exercise.  Standard library
only; run from this directory."""
import json
import os
import struct


def npy(descr, shape, payload, version=1, fortran=False):
    head = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False",
        "(%s)" % "".join("%d," % s for s in shape) if shape else "()")
    lenfmt, pre = ("<H", 10) if version == 1 else ("<I", 12)
    pad = (64 - (pre + len(head) + 1) % 64) % 64
    head = head + " " * pad + "\n"
    return (b"\x93NUMPY" + bytes([version, 0]) + struct.pack(lenfmt, len(head))
            + head.encode("latin1") + payload)


def safetensors(tensors, data, meta=None, length=None):
    header = {}
    if meta is not None:
        header["__metadata__"] = meta
    header.update(tensors)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    n = len(raw) if length is None else length
    return struct.pack("<Q", n) + raw + data


def write(kind, name, blob):
    os.makedirs(os.path.join("corpus", kind), exist_ok=True)
    with open(os.path.join("corpus", kind, name), "wb") as f:
        f.write(blob)


f6 = struct.pack("<6f", 1, -2, 3.5, 0, 1e-3, 7)
write("npy", "valid_f4_2x3.npy", npy("<f4", (2, 3), f6))
write("npy", "valid_i8_4.npy", npy("<i8", (4,), struct.pack("<4q", 1, 2, 3, 4)))
write("npy", "valid_i4_0d_v2.npy", npy("<i4", (), struct.pack("<i", 9), 2))
write("npy", "short_payload.npy", npy("<f4", (2, 3), f6[:-4]))
write("npy", "fortran.npy", npy("<f4", (2, 3), f6, fortran=True))
write("npy", "big_endian.npy", npy(">f4", (2, 3), f6))
write("npy", "huge_shape.npy", npy("<f4", (1 << 62, 8), f6))

t = {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
     "b": {"dtype": "F16", "shape": [2], "data_offsets": [24, 28]},
     "c": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [28, 32]}}
d = f6 + struct.pack("<2e", 1.5, -0.25) + b"\x80\x3f\x00\xc0"
write("safetensors", "valid.safetensors",
      safetensors(t, d, {"format": "pt"}))
write("safetensors", "header_too_long.safetensors",
      safetensors(t, d, length=1 << 20))
write("safetensors", "overlap.safetensors", safetensors(
    {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
     "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, f6[:12]))
write("safetensors", "shape_mismatch.safetensors", safetensors(
    {"a": {"dtype": "F32", "shape": [3, 3], "data_offsets": [0, 24]}}, f6))
write("safetensors", "i64_and_empty.safetensors", safetensors(
    {"i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]},
     "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}},
    struct.pack("<q", 5)))
