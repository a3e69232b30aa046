"""BLIP-2 with a decoder-only language model (OPT): three graphs and a greedy loop.

vision.onnx   pixel_values (n, 3, H, W) -> query_embeds (n, num_query_tokens, lm_hidden):
              vision tower + Q-Former + language projection.
prefill.onnx  query_embeds, input_ids (n, t), attention_mask (n, q + t) -> logits of the last
              position (n, vocab) and present.{i}.key / present.{i}.value (n, heads, q + t, head_dim).
step.onnx     input_ids (n, 1), attention_mask (n, past + 1), past.{i}.key / past.{i}.value ->
              logits (n, vocab) and the presents, one longer.
The query embeddings stand where `generate` puts them (in place of the image tokens at the
start), so the ONNX greedy loop reproduces `model.generate(do_sample=False)` token for token.
"""

from __future__ import annotations

import os
from pathlib import Path

from kira.models.exporters._common import (
    DEFAULT_OPSET,
    cache_keyword,
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

# Salesforce/blip2-opt-2.7b: BlipImageProcessor, 224 x 224 bicubic, CLIP mean/std, no crop
BLIP2_DEFAULT_PREPROCESS = Preprocess(resize_mode="exact", size=(224, 224), crop=None, interpolation="bicubic")


def export_blip2(checkpoint: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "fp32",
                 opset: int = DEFAULT_OPSET) -> Path:
    """Export a Blip2ForConditionalGeneration checkpoint with a decoder-only LM; returns the manifest path.

    Raises ValueError for an encoder-decoder language model (the Flan-T5 variants).
    """
    torch, transformers = require_torch()
    from transformers.cache_utils import DynamicCache

    ckpt = resolve_checkpoint(checkpoint)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tdtype = torch_dtype(dtype)
    model = transformers.Blip2ForConditionalGeneration.from_pretrained(
        str(ckpt), attn_implementation="eager"
    ).to(tdtype).eval()
    cfg = model.config
    tcfg = cfg.text_config
    if getattr(tcfg, "is_encoder_decoder", False):
        raise ValueError("only BLIP-2 with a decoder-only language model (OPT) is supported, not Flan-T5")
    pre_cfg = read_json(ckpt / "preprocessor_config.json")
    pre = preprocess_or_default(pre_cfg, BLIP2_DEFAULT_PREPROCESS, int(cfg.vision_config.image_size), ckpt,
                                default_to_square=True)
    h, w = pre.output_size
    n_layers = int(tcfg.num_hidden_layers)
    n_heads = int(tcfg.num_attention_heads)
    head_dim = int(tcfg.hidden_size) // n_heads
    nq = int(cfg.num_query_tokens)
    kv_arg = cache_keyword(model.language_model)
    present = [f"present.{i}.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    past = [f"past.{i}.{kv}" for i in range(n_layers) for kv in ("key", "value")]

    def flatten(cache):  # type: ignore[no-untyped-def]
        flat = []
        for layer in cache.layers:
            flat += [layer.keys, layer.values]
        return tuple(flat)

    class Vision(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, pixel_values):  # type: ignore[no-untyped-def]
            image_embeds = self.m.vision_model(pixel_values=pixel_values.to(tdtype)).last_hidden_state
            queries = self.m.query_tokens.expand(image_embeds.shape[0], -1, -1)
            q = self.m.qformer(query_embeds=queries, encoder_hidden_states=image_embeds).last_hidden_state
            return self.m.language_projection(q.to(image_embeds.dtype)).float()

    class Prefill(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, query_embeds, input_ids, attention_mask):  # type: ignore[no-untyped-def]
            text = self.m.get_input_embeddings()(input_ids)
            embeds = torch.cat([query_embeds.to(text.dtype), text], dim=1)
            o = self.m.language_model(inputs_embeds=embeds, attention_mask=attention_mask, use_cache=True,
                                      **{kv_arg: DynamicCache()})
            return (o.logits[:, -1].float(),) + flatten(o.past_key_values)

    class Step(torch.nn.Module):  # type: ignore[name-defined]  # torch: require_torch()
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, *kv):  # type: ignore[no-untyped-def]
            cache = DynamicCache([(kv[2 * i], kv[2 * i + 1]) for i in range(n_layers)])
            o = self.m.language_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True,
                                      **{kv_arg: cache})
            return (o.logits[:, -1].float(),) + flatten(o.past_key_values)

    pixels = torch.zeros(2, 3, h, w)
    vision_path = export_graph(
        Vision(), (pixels,), out / "vision.onnx", input_names=["pixel_values"], output_names=["query_embeds"],
        dynamic_axes={"pixel_values": {0: "batch"}, "query_embeds": {0: "batch"}}, opset=opset,
    )
    bos = int(tcfg.bos_token_id)
    with torch.no_grad():
        query = Vision()(pixels)
        ids = torch.full((2, 2), bos, dtype=torch.long)
        mask = torch.ones(2, nq + 2, dtype=torch.long)
        first = Prefill()(query, ids, mask)
    kv_axes = {n: {0: "batch", 2: "total"} for n in present}
    prefill_path = export_graph(
        Prefill(), (query, ids, mask), out / "prefill.onnx",
        input_names=["query_embeds", "input_ids", "attention_mask"], output_names=["logits", *present],
        dynamic_axes={"query_embeds": {0: "batch"}, "input_ids": {0: "batch", 1: "tokens"},
                      "attention_mask": {0: "batch", 1: "total"}, "logits": {0: "batch"}, **kv_axes},
        opset=opset,
    )
    nxt = first[0].argmax(-1, keepdim=True)
    step_path = export_graph(
        Step(), (nxt, torch.ones(2, nq + 3, dtype=torch.long), *first[1:]), out / "step.onnx",
        input_names=["input_ids", "attention_mask", *past], output_names=["logits", *present],
        dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch", 1: "total"},
                      "logits": {0: "batch"}, **{n: {0: "batch", 2: "past"} for n in past}, **kv_axes},
        opset=opset,
    )
    tok = copy_tokenizer(ckpt, out)
    text = tokenizer_settings(ckpt, int(tcfg.max_position_embeddings))
    gen = read_json(ckpt / "generation_config.json")
    eos = gen.get("eos_token_id", tcfg.eos_token_id)
    eos_ids = [int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None]
    pad = tcfg.pad_token_id if tcfg.pad_token_id is not None else (eos_ids[0] if eos_ids else 0)
    return write_manifest(
        out,
        kind="blip2",
        model_id=model_identity(ckpt, checkpoint),
        architecture="Blip2ForConditionalGeneration",
        dtype=dtype,
        opset=opset,
        dims={"lm_hidden": int(tcfg.hidden_size), "layers": n_layers, "heads": n_heads, "head_dim": head_dim,
              "vocab": int(tcfg.vocab_size), "num_query_tokens": nq},
        files=collect_files(out, {"vision": vision_path, "prefill": prefill_path, "step": step_path,
                                  "tokenizer": tok}),
        preprocess=pre,
        text=text,
        extra={"bos_token_id": bos, "eos_token_ids": eos_ids, "pad_token_id": int(pad),
               "image_token_id": -1 if getattr(cfg, "image_token_id", None) is None else int(cfg.image_token_id), "kv_dtype": dtype,
               "max_positions": int(tcfg.max_position_embeddings)},
    )
