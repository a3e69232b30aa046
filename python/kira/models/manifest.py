"""The manifest that travels with exported ONNX files.

One JSON file per exported model says what the model is (identity, kind, dimensions),
how its pixels or text must be prepared (the preprocessing constants of the Hugging Face
processor it was exported from), which opset and dtype its graphs use, and every file it
needs with a sha256 checksum. `load_manifest` verifies the checksums, so a truncated or
swapped file is refused before onnxruntime sees it. No pickle: JSON only.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kira.atomic import write_atomic

SCHEMA_VERSION = 1
MANIFEST_NAME = "kira-model.json"
KINDS = ("clip", "dino", "blip2", "cross-encoder", "sentence")
INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming")


class ManifestError(ValueError):
    """A manifest that is malformed, or whose files are missing or do not match their checksums."""


@dataclass(frozen=True)
class Preprocess:
    """Image preprocessing, as the Hugging Face image processor of the checkpoint does it."""

    resize_mode: str = "shortest_edge"  # "shortest_edge" (CLIP) | "exact" (ViT/BLIP: to height x width) | "none"
    size: tuple[int, int] = (224, 224)  # shortest_edge: (edge, edge); exact: (height, width)
    crop: tuple[int, int] | None = (224, 224)  # center crop (height, width); None = no crop
    interpolation: str = "bicubic"  # Pillow resampling filter name, one of INTERPOLATIONS
    rescale: float | None = 1.0 / 255.0  # multiply uint8 pixels by this; None = no rescale
    mean: tuple[float, float, float] | None = (0.48145466, 0.4578275, 0.40821073)  # None = no normalise
    std: tuple[float, float, float] | None = (0.26862954, 0.26130258, 0.27577711)

    def __post_init__(self) -> None:
        if self.resize_mode not in ("shortest_edge", "exact", "none"):
            raise ManifestError(f"resize_mode must be shortest_edge, exact or none, not {self.resize_mode!r}")
        if self.interpolation not in INTERPOLATIONS:
            raise ManifestError(f"interpolation must be one of {INTERPOLATIONS}, not {self.interpolation!r}")
        if (self.mean is None) != (self.std is None):
            raise ManifestError("mean and std must both be given or both be None")

    @property
    def output_size(self) -> tuple[int, int]:
        """(height, width) of the tensor the model sees."""
        if self.crop is not None:
            return self.crop
        return self.size


@dataclass(frozen=True)
class FileEntry:
    """One file of an exported model, relative to the manifest's directory."""

    path: str  # relative POSIX path
    sha256: str  # hex digest
    bytes: int  # size, for a quick check and for the report


@dataclass(frozen=True)
class Manifest:
    """Everything needed to run an exported model without its checkpoint."""

    kind: str  # one of KINDS
    model_id: str  # where it came from: a checkpoint dir name or a hub id
    architecture: str  # the transformers class it was exported from
    dtype: str  # "fp32" | "fp16": the precision of the graphs' weights and float inputs
    opset: int  # ONNX opset of every graph
    dims: dict[str, int]  # e.g. {"embed": 768}, {"hidden": 384, "patch": 8, "heads": 6}
    files: dict[str, FileEntry]  # role -> file (roles: "vision", "text", "model", "tokenizer", ...)
    preprocess: Preprocess | None = None  # images only
    text: dict[str, Any] = field(default_factory=dict)  # tokenizer settings: max_length, pad_id, eos_id ...
    extra: dict[str, Any] = field(default_factory=dict)  # kind-specific (BLIP-2 token ids, KV layout ...)
    exporter: dict[str, str] = field(default_factory=dict)  # versions of torch/transformers/onnx used
    schema_version: int = SCHEMA_VERSION
    root: Path | None = field(default=None, compare=False)  # directory the manifest was read from

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ManifestError(f"unknown model kind {self.kind!r}; expected one of {KINDS}")
        if self.dtype not in ("fp32", "fp16"):
            raise ManifestError(f"dtype must be fp32 or fp16, not {self.dtype!r}")

    def path(self, role: str) -> Path:
        """Absolute path of the file with `role`. Raises ManifestError if the role is absent."""
        if role not in self.files:
            raise ManifestError(f"{self.kind} manifest has no {role!r} file (it has {sorted(self.files)})")
        if self.root is None:
            raise ManifestError("manifest was not read from disk; its file paths have no root")
        return self.root / self.files[role].path

    def to_json(self) -> str:
        """The manifest as JSON text (the `root` is not stored)."""
        d = asdict(self)
        d.pop("root")
        return json.dumps(d, indent=2, sort_keys=True)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_entry(root: Path, path: Path) -> FileEntry:
    """Checksum `path` (inside `root`) into a FileEntry."""
    return FileEntry(path=path.relative_to(root).as_posix(), sha256=sha256_file(path), bytes=path.stat().st_size)


def save_manifest(manifest: Manifest, out_dir: str | os.PathLike) -> Path:
    """Write `manifest` as out_dir/kira-model.json atomically; returns that path."""
    path = Path(out_dir) / MANIFEST_NAME
    write_atomic(path, manifest.to_json().encode())
    return path


def load_manifest(path: str | os.PathLike, *, verify: bool = True) -> Manifest:
    """Read a manifest (the JSON file, or a directory holding kira-model.json).

    verify: check that every listed file exists and matches its sha256.
    Raises FileNotFoundError naming a missing manifest or model file, ManifestError for
    a malformed manifest or a checksum mismatch.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"model manifest not found: {path} (export one with `kira models export`)")
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc}") from exc
    if not isinstance(d, dict) or d.get("schema_version") != SCHEMA_VERSION:
        raise ManifestError(
            f"{path} is not a kira model manifest of schema_version {SCHEMA_VERSION}; re-export the model"
        )
    try:
        pre = d.get("preprocess")
        if pre is not None:
            pre = Preprocess(
                resize_mode=pre["resize_mode"],
                size=tuple(pre["size"]),
                crop=None if pre["crop"] is None else tuple(pre["crop"]),
                interpolation=pre["interpolation"],
                rescale=pre["rescale"],
                mean=None if pre["mean"] is None else tuple(pre["mean"]),
                std=None if pre["std"] is None else tuple(pre["std"]),
            )
        files = {role: FileEntry(**entry) for role, entry in d["files"].items()}
        manifest = Manifest(
            kind=d["kind"],
            model_id=d["model_id"],
            architecture=d["architecture"],
            dtype=d["dtype"],
            opset=int(d["opset"]),
            dims={k: int(v) for k, v in d["dims"].items()},
            files=files,
            preprocess=pre,
            text=dict(d.get("text", {})),
            extra=dict(d.get("extra", {})),
            exporter=dict(d.get("exporter", {})),
            root=path.parent,
        )
    except (KeyError, TypeError) as exc:
        raise ManifestError(f"malformed manifest {path}: {exc!r}") from exc
    if verify:
        for role, entry in manifest.files.items():
            f = path.parent / entry.path
            if not f.is_file():
                raise FileNotFoundError(f"{manifest.kind} model file for {role!r} not found: {f}")
            if f.stat().st_size != entry.bytes or sha256_file(f) != entry.sha256:
                raise ManifestError(f"{f} does not match the checksum in {path}; the file is corrupt or was replaced")
    return manifest
