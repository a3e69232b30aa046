"""Shared pieces of the exporters: checkpoint resolution, the torch -> ONNX call, manifests.

The exporters use torch's TorchScript-based exporter (`torch.onnx.export(..., dynamo=False)`).
In torch 2.13 it still works and needs no onnxscript; it is deprecated, so its
DeprecationWarning (and the tracer's warnings about Python-side shape checks, which
are constant for a fixed preprocessing size) are silenced inside the call only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kira.models.manifest import FileEntry, Manifest, file_entry, save_manifest

logger = logging.getLogger(__name__)

DEFAULT_OPSET = 17
EXPORT_EXTRA_HINT = "install the export extra: pip install 'kira[export]'"


def require_torch() -> tuple[Any, Any]:
    """Import torch and transformers, or raise ImportError naming the extra."""
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - the test environment has both
        raise ImportError(f"exporting models needs torch and transformers; {EXPORT_EXTRA_HINT}") from exc
    return torch, transformers


def _network_available(host: str = "huggingface.co", timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_checkpoint(checkpoint: str | os.PathLike) -> Path:
    """A local checkpoint directory, or a hub id downloaded where a network exists.

    Raises FileNotFoundError for a missing directory that is not a hub id, and
    ValueError for a hub id when there is no network (nothing is fetched then).
    """
    path = Path(checkpoint)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} is not a Hugging Face checkpoint: config.json not found in it")
        return path
    text = str(checkpoint)
    looks_like_hub_id = text.count("/") == 1 and not text.startswith((".", "/", "~")) and not path.exists()
    if not looks_like_hub_id:
        raise FileNotFoundError(f"checkpoint directory not found: {path}")
    if not _network_available():
        raise ValueError(
            f"{text!r} is not a local directory and looks like a Hugging Face hub id, but this machine has "
            "no network (or HF_HUB_OFFLINE is set); download the checkpoint elsewhere "
            "(`huggingface-cli download ...`) and pass its directory"
        )
    from huggingface_hub import snapshot_download  # comes with transformers

    logger.info("downloading %s from the Hugging Face hub", text)
    return Path(snapshot_download(text))


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file as a dict, or {} when it does not exist."""
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


@contextlib.contextmanager
def quiet_export() -> Iterator[None]:
    """Silence the TorchScript exporter's deprecation and tracer warnings, and only those."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\..*")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        yield


def torch_dtype(dtype: str) -> Any:
    """"fp32"/"fp16" -> the torch dtype. Raises ValueError for anything else."""
    import torch

    if dtype == "fp32":
        return torch.float32
    if dtype == "fp16":
        return torch.float16
    raise ValueError(f"dtype must be 'fp32' or 'fp16', not {dtype!r}")


def export_graph(
    module: Any,
    args: tuple[Any, ...],
    path: Path,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: dict[str, dict[int, str]],
    opset: int = DEFAULT_OPSET,
) -> Path:
    """Trace `module` on `args` into an ONNX file at `path` and check it.

    The module is put in eval mode first: a wrapper nn.Module starts in training mode,
    and the exporter restores that mode recursively afterwards, which would switch the
    wrapped model's dropout on.
    """
    import onnx
    import torch

    module.eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    # trace into a private directory: a > 2 GB model comes out with one external-data file
    # per tensor, named after the tensor, which would collide between graphs of one export
    work = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.stem}."))
    try:
        traced = work / path.name
        with quiet_export(), torch.no_grad():
            torch.onnx.export(
                module,
                args,
                str(traced),
                input_names=list(input_names),
                output_names=list(output_names),
                dynamic_axes=dynamic_axes,
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
        module.eval()
        if [p.name for p in work.iterdir()] == [path.name]:
            os.replace(traced, path)
        else:  # external data: gather it into one file beside the graph, <name>.onnx.data
            model = onnx.load(str(traced))
            onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                            location=f"{path.name}.data", size_threshold=1024)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    onnx.checker.check_model(str(path))  # by path: works for > 2 GB models with external data too
    return path


def copy_tokenizer(checkpoint: Path, out_dir: Path) -> Path:
    """Put a tokenizer.json for the checkpoint in out_dir (copied, or converted by transformers).

    Raises FileNotFoundError when the checkpoint has no tokenizer at all.
    """
    src = checkpoint / "tokenizer.json"
    dst = out_dir / "tokenizer.json"
    if src.is_file():
        shutil.copyfile(src, dst)
        return dst
    _, transformers = require_torch()
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(checkpoint))
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"no tokenizer in {checkpoint}: tokenizer.json not found ({exc})") from exc
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise FileNotFoundError(f"no fast tokenizer in {checkpoint}: tokenizer.json not found and not convertible")
    backend.save(str(dst))
    return dst


def tokenizer_settings(checkpoint: Path, default_max: int) -> dict[str, Any]:
    """max_length / pad id / pad token for the runtime tokenizer, from tokenizer_config.json."""
    cfg = read_json(checkpoint / "tokenizer_config.json")
    max_len = cfg.get("model_max_length", default_max)
    if not isinstance(max_len, int) or max_len > default_max:
        max_len = default_max
    pad = cfg.get("pad_token")
    if isinstance(pad, dict):
        pad = pad.get("content")
    return {"max_length": int(max_len), "pad_token": pad}


def preprocess_or_default(pre_cfg: dict[str, Any], default: Any, image_size: int, checkpoint: Path,
                          *, default_to_square: bool = True) -> Any:
    """The checkpoint's preprocessing, or the model family's default at the model's image size
    (with a warning) when the checkpoint has no preprocessor_config.json."""
    import dataclasses

    from kira.models.preprocess import preprocess_from_hf

    if pre_cfg:
        return preprocess_from_hf(pre_cfg, default_to_square=default_to_square)
    logger.warning("%s has no preprocessor_config.json; using the family's default preprocessing at %d px",
                   checkpoint, image_size)
    crop = None if default.crop is None else (image_size, image_size)
    return dataclasses.replace(default, size=(image_size, image_size), crop=crop)


def cache_keyword(model: Any) -> str:
    """The name a decoder's forward takes its KV cache under: `cache` (transformers 5) or
    `past_key_values` (transformers 4)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def exporter_versions() -> dict[str, str]:
    """Versions of the tools that produced an export, for the manifest."""
    import onnx
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__}


def collect_files(out_dir: Path, roles: dict[str, Path]) -> dict[str, FileEntry]:
    """Checksum the named files plus any external-data files written beside them."""
    files = {role: file_entry(out_dir, p) for role, p in roles.items()}
    named = {p.resolve() for p in roles.values()}
    for p in sorted(out_dir.iterdir()):
        if p.is_file() and p.resolve() not in named and not p.name.startswith(".") and p.suffix != ".json":
            files[f"external:{p.name}"] = file_entry(out_dir, p)
    return files


def write_manifest(out_dir: Path, **fields: Any) -> Path:
    """Build a Manifest from `fields` (plus exporter versions) and save it atomically."""
    fields.setdefault("exporter", exporter_versions())
    return save_manifest(Manifest(**fields), out_dir)


def model_identity(checkpoint: Path, given: str | os.PathLike) -> str:
    """What to call the model in the manifest: the hub id given, or the checkpoint's name."""
    cfg = read_json(checkpoint / "config.json")
    name = cfg.get("_name_or_path") or ""
    if isinstance(given, str) and not Path(given).exists():
        return given
    return name if name and not Path(name).is_absolute() else checkpoint.name
