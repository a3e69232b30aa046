"""CLIP: the vision tower and the text tower, each with its projection, as two ONNX graphs."""

from __future__ import annotations

import os
from pathlib import Path

from kira.models.exporters._common import (
    DEFAULT_OPSET,
    collect_files,
    copy_tokenizer,
    export_graph,
    model_identity,
    preprocess_or_default,
    read_json,
    require_torch,
    resolve_checkpoint,
    tokenizer_settings,
    torch_dtype,
    write_manifest,
)
from kira.models.manifest import Preprocess

CLIP_DEFAULT_PREPROCESS = Preprocess()  # openai/clip-vit-large-patch14: 224 bicubic, crop 224, CLIP mean/std


def export_clip(checkpoint: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "fp32",
                opset: int = DEFAULT_OPSET) -> Path:
    """Export a CLIPModel checkpoint's two towers to out_dir; returns the manifest path.

    vision.onnx: pixel_values float32 (n, 3, H, W) -> image_embeds float32 (n, projection_dim)
    text.onnx: input_ids int64 (n, t), attention_mask int64 (n, t) -> text_embeds float32 (n, projection_dim)
    Embeddings are unnormalised (as CLIPModel returns them); the runtime normalises.
    """
    torch, transformers = require_torch()
    ckpt = resolve_checkpoint(checkpoint)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tdtype = torch_dtype(dtype)
    model = transformers.CLIPModel.from_pretrained(str(ckpt), attn_implementation="eager").to(tdtype).eval()
    cfg = model.config
    pre_cfg = read_json(ckpt / "preprocessor_config.json")
    pre = preprocess_or_default(pre_cfg, CLIP_DEFAULT_PREPROCESS, int(cfg.vision_config.image_size), ckpt,
                                default_to_square=False)
    h, w = pre.output_size

    class Vision(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, pixel_values):  # type: ignore[no-untyped-def]
            pooled = self.m.vision_model(pixel_values=pixel_values.to(tdtype)).pooler_output
            return self.m.visual_projection(pooled).float()

    class Text(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask):  # type: ignore[no-untyped-def]
            pooled = self.m.text_model(input_ids=input_ids, attention_mask=attention_mask).pooler_output
            return self.m.text_projection(pooled).float()

    vision_path = export_graph(
        Vision(), (torch.zeros(2, 3, h, w),), out / "vision.onnx",
        input_names=["pixel_values"], output_names=["image_embeds"],
        dynamic_axes={"pixel_values": {0: "batch"}, "image_embeds": {0: "batch"}}, opset=opset,
    )
    eos = int(cfg.text_config.eos_token_id)
    ids = torch.tensor([[0, 1, eos, eos], [0, 1, 1, eos]], dtype=torch.long) % cfg.text_config.vocab_size
    text_path = export_graph(
        Text(), (ids, torch.ones_like(ids)), out / "text.onnx",
        input_names=["input_ids", "attention_mask"], output_names=["text_embeds"],
        dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
                      "text_embeds": {0: "batch"}}, opset=opset,
    )
    tok_path = copy_tokenizer(ckpt, out)
    text = tokenizer_settings(ckpt, int(cfg.text_config.max_position_embeddings))
    text["pad_id"] = int(cfg.text_config.pad_token_id or 0)
    return write_manifest(
        out,
        kind="clip",
        model_id=model_identity(ckpt, checkpoint),
        architecture="CLIPModel",
        dtype=dtype,
        opset=opset,
        dims={"embed": int(cfg.projection_dim), "vision_hidden": int(cfg.vision_config.hidden_size),
              "text_hidden": int(cfg.text_config.hidden_size)},
        files=collect_files(out, {"vision": vision_path, "text": text_path, "tokenizer": tok_path}),
        preprocess=pre,
        text=text,
        extra={"logit_scale": float(model.logit_scale.exp().item())},
    )
