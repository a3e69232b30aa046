"""Tokenisation for the exported text models, with the `tokenizers` package only (no torch)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kira.models.manifest import Manifest


class ManifestTokenizer:
    """The tokenizer.json of an exported model, padded to the batch's longest and truncated.

    Thread safety: `tokenizers.Tokenizer` is safe to call from several threads.
    """

    def __init__(self, manifest: Manifest, *, pad_id: int | None = None) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(manifest.path("tokenizer")))
        self.max_length = int(manifest.text.get("max_length", 512))
        self.inputs = list(manifest.text.get("inputs", ["input_ids", "attention_mask"]))
        pad_token = manifest.text.get("pad_token")
        if pad_id is None:
            tok_id = self.tokenizer.token_to_id(pad_token) if isinstance(pad_token, str) else None
            pad_id = tok_id if tok_id is not None else int(manifest.text.get("pad_id", 0))
        self.pad_id = int(pad_id)
        self.tokenizer.no_padding()
        # truncation by the tokenizer itself keeps the special tokens ([SEP], EOS) in place
        self.tokenizer.enable_truncation(max_length=self.max_length)

    def ids(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids of one text, truncated to max_length."""
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Feeds for the graph: input_ids, attention_mask (and token_type_ids if it takes them), int64 (n, t)."""
        if isinstance(texts, str):
            raise ValueError("pass a list of strings, not a single string")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        if pairs is None:
            encs = self.tokenizer.encode_batch(list(texts))
        else:
            encs = self.tokenizer.encode_batch(list(zip(texts, pairs)))
        rows = [(e.ids, e.type_ids) for e in encs]
        width = max(1, max(len(ids) for ids, _ in rows))
        input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        type_ids = np.zeros((len(rows), width), dtype=np.int64)
        for i, (ids, types) in enumerate(rows):
            input_ids[i, : len(ids)] = ids
            mask[i, : len(ids)] = 1
            type_ids[i, : len(types)] = types
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": type_ids}
        return {name: feeds[name] for name in self.inputs}

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids, special tokens dropped."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)
