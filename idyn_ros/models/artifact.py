"""The model artifact as a file: format version, checksum, atomic writes, and reading with clear errors.

Torch-free (numpy/onnx only) so the runtime reads artifacts through it. Both exporters (the torch
models in ``models.export`` and the GPs in ``models.gp.export``) write through :func:`write_artifact`.

Format 2 (format 1 artifacts are refused with a re-export hint):
- ``metadata_props["idyn"]``: the JSON metadata (schema in ``models.export.build_metadata``);
- ``metadata_props["idyn_sha256"]``: sha256 of the whole serialized ModelProto with this value empty,
  so any changed byte of graph, weights or metadata is caught on load (the model id alone covers
  neither the weights' integrity on disk nor the metadata);
- hybrid-r models compute r from q (``models.features``, R_FEATURE_VERSION 2), not from dq.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from idyn_ros.data.atomic import atomic_write_bytes
from idyn_ros.errors import ModelArtifactError

FORMAT_VERSION = 2
SUPPORTED_FORMATS = (2,)
METADATA_KEY = "idyn"
CHECKSUM_KEY = "idyn_sha256"
_FORMAT_CHANGES = {1: "written before artifact checksums and the q-based r feature"}
#: Relative sample-rate difference a model accepts: a 1 kHz model runs on 980-1020 Hz (training resamples beyond it).
RATE_TOLERANCE = 0.02


def same_rate(rate_hz: float, model_rate_hz: float) -> bool:
    """Whether data at ``rate_hz`` is at the model's rate within :data:`RATE_TOLERANCE`."""
    return abs(rate_hz - model_rate_hz) <= RATE_TOLERANCE * model_rate_hz


def _checksum(proto: Any, entry: Any) -> str:
    """sha256 of the serialized model with the checksum entry's value empty."""
    saved = entry.value
    entry.value = ""
    try:
        return hashlib.sha256(proto.SerializeToString()).hexdigest()
    finally:
        entry.value = saved


def write_artifact(proto: Any, metadata: dict[str, Any], path: str | Path) -> None:
    """Add the metadata and its checksum to an ONNX ModelProto and write it atomically."""
    meta = {**metadata, "format_version": FORMAT_VERSION}
    for key in (METADATA_KEY, CHECKSUM_KEY):
        for i in reversed(range(len(proto.metadata_props))):
            if proto.metadata_props[i].key == key:
                del proto.metadata_props[i]
    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(meta, default=float)
    check = proto.metadata_props.add()
    check.key = CHECKSUM_KEY
    check.value = _checksum(proto, check)
    try:
        atomic_write_bytes(path, proto.SerializeToString())
    except OSError as exc:  # a folder, a read-only place, a file where a folder should be: one line, not a traceback
        raise ModelArtifactError(f"{path}: cannot write the model there ({exc.strerror or exc}); "
                                 f"choose another output path") from None


def _read_varint(data: bytes, i: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    while i < len(data):
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            return None
    return None


def _wire_problem(data: bytes) -> str | None:
    """Why ``data`` cannot be a complete ModelProto, from its top-level protobuf fields (None = plausible)."""
    looks_like_onnx = data[:1] == b"\x08"  # every ONNX file starts with field 1, ir_version (varint)
    not_onnx = "not an ONNX file"
    cut = f"truncated ONNX file ({len(data)} bytes, cut inside a field header)"
    i = 0
    while i < len(data):
        key = _read_varint(data, i)
        if key is None:
            return cut if looks_like_onnx else not_onnx
        field, wire = key[0] >> 3, key[0] & 7
        if field == 0 or field > 64 or wire not in (0, 2):
            return f"damaged ONNX file (invalid protobuf field at byte {i})" if looks_like_onnx else not_onnx
        value = _read_varint(data, key[1])
        if value is None:
            return cut if looks_like_onnx else not_onnx
        length, i = value
        if wire == 2:
            if i + length > len(data):
                return (f"truncated ONNX file ({len(data)} bytes; its field {field} needs {i + length})"
                        if looks_like_onnx else not_onnx)
            i += length
    return None


def load_artifact(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """(ModelProto, idyn metadata) of a verified artifact; ModelArtifactError saying what is wrong otherwise."""
    import onnx

    path = Path(path)
    if path.is_dir():  # `idyn train --out DIR`'s directory: the advice to train one would send the user in a circle
        inside = path / "model.onnx"
        raise ModelArtifactError(f"{path}: a directory, not a model file; pass {inside}" if inside.is_file() else
                                 f"{path}: a directory without a model.onnx, not a model file; pass the .onnx file "
                                 f"(`idyn train ... --out DIR` writes DIR/model.onnx)")
    if not path.is_file():
        raise ModelArtifactError(f"{path}: no such model file; train one with `idyn train ... --out DIR`")
    data = path.read_bytes()
    rewrite = "write it again (`idyn train` or `idyn export`)"
    if not data:
        raise ModelArtifactError(f"{path}: empty file (0 bytes), not a model: the write was interrupted; {rewrite}")
    problem = _wire_problem(data)
    if problem is not None:
        raise ModelArtifactError(f"{path}: {problem}; {rewrite}")
    try:
        proto = onnx.ModelProto.FromString(data)
    except Exception as exc:  # protobuf DecodeError deeper inside the graph
        raise ModelArtifactError(f"{path}: damaged ONNX file ({len(data)} bytes: {exc}); {rewrite}") from None
    if proto.ir_version <= 0 or not proto.graph.node:
        raise ModelArtifactError(f"{path}: not an ONNX model (no graph); pass the model.onnx that `idyn train` wrote")
    entries = {p.key: p for p in proto.metadata_props}
    if METADATA_KEY not in entries:
        raise ModelArtifactError(f"{path}: ONNX file without idyn metadata; export it with `idyn export`")
    check = entries.get(CHECKSUM_KEY)
    if check is not None:
        actual = _checksum(proto, check)
        if actual != check.value:
            raise ModelArtifactError(
                f"{path}: checksum mismatch (file sha256 {actual[:12]}, recorded {check.value[:12]}): the file "
                f"changed after export (damaged copy or edited); copy it again or {rewrite}"
            )
    try:
        meta = json.loads(entries[METADATA_KEY].value)
    except ValueError as exc:
        raise ModelArtifactError(f"{path}: damaged idyn metadata ({exc}); {rewrite}") from None
    if not isinstance(meta, dict):
        raise ModelArtifactError(f"{path}: damaged idyn metadata (a JSON {type(meta).__name__}, not an object); "
                                 f"{rewrite}")
    version = meta.get("format_version")
    if version not in SUPPORTED_FORMATS:
        why = f" ({_FORMAT_CHANGES[version]})" if version in _FORMAT_CHANGES else ""
        raise ModelArtifactError(
            f"{path}: artifact format {version}{why} is not supported (this runtime reads {SUPPORTED_FORMATS}); "
            f"re-export it with `idyn export --checkpoint RUN_DIR --robot ROBOT --out {path.name}` "
            f"(hybrid-r models need retraining)"
        )
    if check is None:
        raise ModelArtifactError(f"{path}: format {version} artifact without its checksum: damaged or not written "
                                 f"by `idyn export`; {rewrite}")
    require_keys(meta, ("robot", "joint_names"), path)
    return proto, meta


def require_keys(meta: dict[str, Any], keys: Sequence[str], path: str | Path) -> None:
    """ModelArtifactError naming the metadata ``keys`` that ``meta`` lacks (else a KeyError deep in the reader)."""
    missing = [key for key in keys if meta.get(key) is None]
    if missing:
        raise ModelArtifactError(f"{path}: idyn metadata lacks {missing}: written by another exporter or edited; "
                                 f"re-export it with `idyn export --checkpoint RUN_DIR --robot ROBOT --out "
                                 f"{Path(path).name}`")


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The artifact's ``idyn`` metadata, after the same checks as :func:`load_artifact`."""
    return load_artifact(path)[1]
