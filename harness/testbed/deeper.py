"""A deeper copy of a test-bed model: its decoder layers repeated, a real and steady decode slowdown.

Each decode step runs every layer, so a copy with more layers makes the same server do more work
per token at the same prompt, output and tokenizer: the workload and its prompts do not change
and the runs stay paired. Layer k of the copy holds the bytes of layer k mod n of the source (n
layers), so the copy is built by moving bytes, with no tensor library. Safetensors layout: an
8-byte little-endian header length, a JSON header (name -> dtype, shape, data_offsets into the
data that follows; `__metadata__` aside), then the data.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

from harness.errors import SparkbenchError

WEIGHTS = "model.safetensors"
LAYER_NAME = re.compile(r"^model\.layers\.(\d+)\.(.+)$")


def read_safetensors(path: Path) -> tuple[dict, dict[str, bytes]]:
    """(metadata, tensor name -> (header entry, raw bytes)) of a safetensors file."""
    blob = path.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    data = blob[8 + size:]
    metadata = header.pop("__metadata__", {})
    tensors = {name: (entry, data[entry["data_offsets"][0]:entry["data_offsets"][1]]) for name, entry in header.items()}
    return metadata, tensors


def write_safetensors(path: Path, metadata: dict, tensors: dict[str, tuple[dict, bytes]]) -> None:
    header: dict = {"__metadata__": metadata} if metadata else {}
    chunks, offset = [], 0
    for name, (entry, raw) in tensors.items():
        header[name] = {"dtype": entry["dtype"], "shape": entry["shape"], "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format pads the header to a multiple of 8 bytes
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


def repeated_layers(tensors: dict[str, tuple[dict, bytes]], source_layers: int,
                    layers: int) -> dict[str, tuple[dict, bytes]]:
    """The tensors with layers 0..layers-1, layer k a copy of source layer k mod source_layers."""
    kept = {name: t for name, t in tensors.items() if not LAYER_NAME.match(name)}
    per_layer = {}
    for name, t in tensors.items():
        match = LAYER_NAME.match(name)
        if match:
            per_layer.setdefault(int(match.group(1)), {})[match.group(2)] = t
    for k in range(layers):
        for part, t in per_layer[k % source_layers].items():
            kept[f"model.layers.{k}.{part}"] = t
    return kept


def deeper_model(source: Path, out: Path, layers: int) -> Path:
    """Copy the model folder `source` to `out` with `layers` decoder layers; returns `out`."""
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    source_layers = config["num_hidden_layers"]
    if layers < source_layers:
        raise SparkbenchError(f"a deeper copy needs at least the source's {source_layers} layers, not {layers}")
    metadata, tensors = read_safetensors(source / WEIGHTS)
    shutil.copytree(source, out, ignore=shutil.ignore_patterns(WEIGHTS, "*.lock"), dirs_exist_ok=True)
    write_safetensors(out / WEIGHTS, metadata, repeated_layers(tensors, source_layers, layers))
    (out / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers}, indent=2), encoding="utf-8")
    return out
