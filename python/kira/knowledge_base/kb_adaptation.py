"""The knowledge base's domain adapter and text->image bridge (a part of `KnowledgeBase`).

`AdapterAndBridge` is a mixin: the adapter the visual index is projected with (set by a
writer, picked up by readers on refresh) and, for a model stack with no text tower in image
space, the fitted text->image bridge that carries a text question into the visual index.
"""

from __future__ import annotations

import logging
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from kira.knowledge_base.adapters import adapter_name, is_registered, registered_adapters, resolve_adapter

log = logging.getLogger(__name__)
BRIDGE_REFIT_SHARE = 0.05  # refit the text->image bridge once the captioned documents changed by this share (`bridge`)


def _check_archive(path: Path) -> None:
    """Raise zipfile.BadZipFile when `path` is a .npz archive that is damaged (each member's
    checksum is read), before numpy opens it: a damaged archive must mean a refit, not an
    error on every text ask."""
    if path.suffix != ".npz" or not path.is_file():
        return
    with open(path, "rb") as fh, zipfile.ZipFile(fh) as archive:
        bad = archive.testzip()
    if bad is not None:
        raise zipfile.BadZipFile(f"{path}: member {bad} is damaged")


class AdapterAndBridge:
    """Mixin of `KnowledgeBase` (module docstring). Needs ``path``, ``store``, ``vectors``, ``models``,
    ``_adapter``, ``_caches`` and ``_writable`` of the knowledge base."""

    # ---- domain adapter ---------------------------------------------------------------
    @property
    def adapter(self) -> Any:
        return self._adapter

    def set_adapter(self, adapter: Any) -> None:
        """Store a domain adapter with the knowledge base and re-project the visual index.

        `adapter` has ``apply(vectors) -> vectors``, ``save(path)`` and a ``load(path)``
        classmethod, and its class is registered in `kira.knowledge_base.adapters` (only
        those are imported on open: no code is named by the knowledge base itself).
        None removes the adapter. Raises ValueError for an unregistered class.
        Queries in the visual space go through the same ``apply``. Commits.
        """
        self._writable()
        vectors = self._ensure_dims()
        target = self.path / "adapter"
        if adapter is None:
            shutil.rmtree(target, ignore_errors=True)
            self.store.set_meta("adapter_class", "")
        else:
            cls = type(adapter)
            if not is_registered(cls):
                raise ValueError(
                    f"{cls.__module__}.{cls.__qualname__} is not a registered adapter (allowed: "
                    f"{', '.join(registered_adapters())}); register it with "
                    "kira.knowledge_base.adapters.register_adapter"
                )
            tmp = self.path / "adapter.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            adapter.save(tmp / "adapter.npz")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(tmp, target)
            self.store.set_meta("adapter_class", adapter_name(cls))
        # readers compare this on refresh: a changed adapter means a re-projected visual index to load
        self.store.set_meta("adapter_version", str(int(self.store.get_meta("adapter_version", "0") or 0) + 1))
        self._adapter = adapter
        transform, dim = self._adapter_transform(vectors.dims["visual"])
        vectors.reproject_visual(self.store, transform, dim)
        self.commit(checkpoint=True)  # the files hold the re-projected index before any reader reloads

    # ---- few-shot adaptation, validated (kira.knowledge_base.kb_fewshot) ----------------
    def adapt(self, labels: Any, *, methods: Any = None, seed: int | None = None, **validation: Any) -> Any:
        """Adapt to the user's labelled documents (doc id -> class) without ever choosing a method
        that validation found worse than the frozen vectors; returns the `AdaptationReport`
        (what was measured and chosen). See `kira.knowledge_base.kb_fewshot.adapt`."""
        from kira.knowledge_base.kb_fewshot import adapt

        return adapt(self, labels, methods=methods, seed=seed, **validation)

    @property
    def adaptation(self) -> Any:
        """The last `kb.adapt` report (`kira.adapt.validation.AdaptationReport`), or None."""
        from kira.knowledge_base.kb_fewshot import report_of

        return report_of(self)

    def classify(self, doc_ids: Any) -> list[str]:
        """The class `kb.adapt`'s chosen classifier gives each stored document (ValueError before `adapt`)."""
        from kira.knowledge_base.kb_fewshot import classify

        return classify(self, doc_ids)

    def _load_adapter(self) -> Any:
        name = self.store.get_meta("adapter_class") or ""
        if not name:
            return None
        return resolve_adapter(name).load(self.path / "adapter" / "adapter.npz")

    def _adapter_transform(self, raw_dim: int):
        if self._adapter is None:
            return None, raw_dim
        probe = np.zeros((1, raw_dim), dtype=np.float32)
        probe[0, 0] = 1.0
        out_dim = int(np.asarray(self._adapter.apply(probe)).shape[1])
        return self._adapter.apply, out_dim

    def visual_query(self, vectors: np.ndarray) -> np.ndarray:
        """Raw image-space query vectors -> the visual index's space (through the adapter, if set)."""
        assert self.vectors is not None
        return self.vectors.prepare("visual", np.atleast_2d(vectors))

    # ---- text -> image bridge (default stack) -----------------------------------------
    def bridge(self) -> Any:
        """The TextToImageBridge fitted on this knowledge base's captioned images, or None.

        Fitted on (document description text vector, raw image vector) pairs of documents
        with a caption or tags; saved beside the database and refitted when the number of
        such documents has changed by more than `BRIDGE_REFIT_SHARE` of the number it was
        fitted on (a fit costs about 0.45 s at 1,000 pairs and 1.6 s at 10,000, and a
        linear map fitted on 95% of the pairs is all but the same map). Needs at least 2
        captioned documents.
        """
        if "bridge" in self._caches:
            return self._caches["bridge"]
        from kira.models.bridge import TextToImageBridge

        ids = self.store.captioned_document_ids()
        bridge = None
        path = self.path / "bridge.npz"
        fitted_on = int(self.store.get_meta("bridge_fitted_on", "0") or 0)
        if len(ids) >= 2 and self.vectors is not None:
            current = fitted_on >= 2 and abs(len(ids) - fitted_on) <= BRIDGE_REFIT_SHARE * fitted_on
            if current and self.store.get_meta("bridge_file"):
                try:
                    stored = self.path / (self.store.get_meta("bridge_file") or "")
                    _check_archive(stored)
                    bridge = TextToImageBridge.load(stored)
                except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
                    log.warning("stored bridge is unreadable (%s); refitting", exc)
            if bridge is None:
                text = self.store.vectors("text", ids, self.vectors.dims["text"])
                image = self.store.vectors("visual", ids, self.vectors.dims["visual"])
                bridge = TextToImageBridge()
                bridge.fit(text, image)
                if not self.read_only and not self.store.in_transaction:
                    saved = bridge.save(path)
                    saved_path = Path(saved) if isinstance(saved, (str, os.PathLike)) else path
                    self.store.set_meta("bridge_file", saved_path.name if saved_path.exists() else path.name)
                    self.store.set_meta("bridge_fitted_on", str(len(ids)))
                    self.store.commit_meta()
        self._caches["bridge"] = bridge
        return bridge
