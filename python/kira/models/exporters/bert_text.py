"""BERT-family text models: a cross-encoder (sequence classification) and a sentence encoder.

Both graphs take input_ids, attention_mask and (where the architecture has them)
token_type_ids, all int64 (n, t).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kira.models.exporters._common import (
    DEFAULT_OPSET,
    collect_files,
    copy_tokenizer,
    export_graph,
    model_identity,
    read_json,
    require_torch,
    resolve_checkpoint,
    tokenizer_settings,
    torch_dtype,
    write_manifest,
)


def _text_axes(names: list[str], output: str) -> dict[str, dict[int, str]]:
    axes: dict[str, dict[int, str]] = {n: {0: "batch", 1: "tokens"} for n in names}
    axes[output] = {0: "batch"}
    return axes


def _dummy(torch: Any, vocab: int, with_types: bool) -> tuple[list[str], tuple[Any, ...]]:
    ids = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 2, 8, 2]], dtype=torch.long) % vocab
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.long)
    if with_types:
        types = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], dtype=torch.long)
        return ["input_ids", "attention_mask", "token_type_ids"], (ids, mask, types)
    return ["input_ids", "attention_mask"], (ids, mask)


def _has_token_types(config: Any) -> bool:
    return int(getattr(config, "type_vocab_size", 0) or 0) > 0


def export_cross_encoder(checkpoint: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "fp32",
                         opset: int = DEFAULT_OPSET) -> Path:
    """Export an AutoModelForSequenceClassification checkpoint (ms-marco-MiniLM style).

    model.onnx: input_ids, attention_mask[, token_type_ids] -> logits float32 (n, num_labels).
    Returns the manifest path.
    """
    torch, transformers = require_torch()
    ckpt = resolve_checkpoint(checkpoint)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tdtype = torch_dtype(dtype)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(ckpt), attn_implementation="eager"
    ).to(tdtype).eval()
    cfg = model.config
    names, args = _dummy(torch, int(cfg.vocab_size), _has_token_types(cfg))

    class Cross(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, *inputs):  # type: ignore[no-untyped-def]
            return self.m(**dict(zip(names, inputs))).logits.float()

    path = export_graph(Cross(), args, out / "model.onnx", input_names=names, output_names=["logits"],
                        dynamic_axes=_text_axes(names, "logits"), opset=opset)
    tok = copy_tokenizer(ckpt, out)
    text = tokenizer_settings(ckpt, int(getattr(cfg, "max_position_embeddings", 512)))
    text["inputs"] = names
    return write_manifest(
        out, kind="cross-encoder", model_id=model_identity(ckpt, checkpoint),
        architecture=type(model).__name__, dtype=dtype, opset=opset,
        dims={"hidden": int(cfg.hidden_size), "num_labels": int(cfg.num_labels)},
        files=collect_files(out, {"model": path, "tokenizer": tok}), text=text,
    )


def _pooling_mode(ckpt: Path) -> str:
    """sentence-transformers' pooling (1_Pooling/config.json); mean when there is none."""
    cfg = read_json(ckpt / "1_Pooling" / "config.json")
    if cfg.get("pooling_mode_cls_token"):
        return "cls"
    if cfg and not cfg.get("pooling_mode_mean_tokens", True):
        raise ValueError(f"{ckpt}: only mean or CLS pooling is supported, the pooling config is {cfg}")
    return "mean"


def export_sentence(checkpoint: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "fp32",
                    opset: int = DEFAULT_OPSET) -> Path:
    """Export a sentence encoder (an AutoModel + sentence-transformers pooling).

    model.onnx: input_ids, attention_mask[, token_type_ids] -> sentence_embedding float32 (n, hidden),
    pooled (mean over unmasked tokens, or CLS) but not normalised. Returns the manifest path.
    """
    torch, transformers = require_torch()
    ckpt = resolve_checkpoint(checkpoint)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tdtype = torch_dtype(dtype)
    model = transformers.AutoModel.from_pretrained(str(ckpt), attn_implementation="eager").to(tdtype).eval()
    cfg = model.config
    pooling = _pooling_mode(ckpt)
    names, args = _dummy(torch, int(cfg.vocab_size), _has_token_types(cfg))

    class Sentence(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, *inputs):  # type: ignore[no-untyped-def]
            feeds = dict(zip(names, inputs))
            hidden = self.m(**feeds).last_hidden_state.float()
            if pooling == "cls":
                return hidden[:, 0]
            mask = feeds["attention_mask"].unsqueeze(-1).float()
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    path = export_graph(Sentence(), args, out / "model.onnx", input_names=names,
                        output_names=["sentence_embedding"], dynamic_axes=_text_axes(names, "sentence_embedding"),
                        opset=opset)
    tok = copy_tokenizer(ckpt, out)
    text = tokenizer_settings(ckpt, int(getattr(cfg, "max_position_embeddings", 512)))
    text["inputs"] = names
    st_cfg = read_json(ckpt / "sentence_bert_config.json")
    if isinstance(st_cfg.get("max_seq_length"), int):
        text["max_length"] = min(text["max_length"], st_cfg["max_seq_length"])
    return write_manifest(
        out, kind="sentence", model_id=model_identity(ckpt, checkpoint),
        architecture=type(model).__name__, dtype=dtype, opset=opset,
        dims={"embed": int(cfg.hidden_size)},
        files=collect_files(out, {"model": path, "tokenizer": tok}), text=text, extra={"pooling": pooling},
    )
