"""DINO (ViT, patch 8 or 16): the CLS embedding and the last layer's CLS-to-patch attention."""

from __future__ import annotations

import os
from pathlib import Path

from kira.models.exporters._common import (
    DEFAULT_OPSET,
    collect_files,
    export_graph,
    model_identity,
    preprocess_or_default,
    read_json,
    require_torch,
    resolve_checkpoint,
    torch_dtype,
    write_manifest,
)
from kira.models.manifest import Preprocess

# facebook/dino-vits8: ViTImageProcessor, 224 x 224 bilinear resize, no crop, ImageNet mean/std
DINO_DEFAULT_PREPROCESS = Preprocess(
    resize_mode="exact", size=(224, 224), crop=None, interpolation="bilinear",
    mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
)


def export_dino(checkpoint: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "fp32",
                opset: int = DEFAULT_OPSET) -> Path:
    """Export a ViTModel (DINO) checkpoint to out_dir/model.onnx; returns the manifest path.

    model.onnx: pixel_values float32 (n, 3, H, W) ->
      cls_embedding float32 (n, hidden): the final (layer-normed) CLS token,
      cls_attention float32 (n, heads, grid_h * grid_w): last layer's attention from CLS to each patch.
    """
    torch, transformers = require_torch()
    ckpt = resolve_checkpoint(checkpoint)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tdtype = torch_dtype(dtype)
    model = transformers.ViTModel.from_pretrained(
        str(ckpt), attn_implementation="eager", add_pooling_layer=False
    ).to(tdtype).eval()
    cfg = model.config
    pre_cfg = read_json(ckpt / "preprocessor_config.json")
    pre = preprocess_or_default(pre_cfg, DINO_DEFAULT_PREPROCESS, int(cfg.image_size), ckpt,
                                default_to_square=True)
    h, w = pre.output_size
    patch = int(cfg.patch_size)
    if h % patch or w % patch:
        raise ValueError(f"model input {h}x{w} is not a multiple of the patch size {patch}")

    class Dino(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, pixel_values):  # type: ignore[no-untyped-def]
            o = self.m(pixel_values=pixel_values.to(tdtype), output_attentions=True)
            cls = o.last_hidden_state[:, 0]
            attn = o.attentions[-1][:, :, 0, 1:]
            return cls.float(), attn.float()

    path = export_graph(
        Dino(), (torch.zeros(2, 3, h, w),), out / "model.onnx",
        input_names=["pixel_values"], output_names=["cls_embedding", "cls_attention"],
        dynamic_axes={"pixel_values": {0: "batch"}, "cls_embedding": {0: "batch"}, "cls_attention": {0: "batch"}},
        opset=opset,
    )
    return write_manifest(
        out,
        kind="dino",
        model_id=model_identity(ckpt, checkpoint),
        architecture="ViTModel",
        dtype=dtype,
        opset=opset,
        dims={"hidden": int(cfg.hidden_size), "heads": int(cfg.num_attention_heads), "patch": patch,
              "grid_h": h // patch, "grid_w": w // patch},
        files=collect_files(out, {"model": path}),
        preprocess=pre,
    )
