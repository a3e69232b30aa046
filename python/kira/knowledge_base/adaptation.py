"""A knowledge base's domain adapter and text->image bridge (`AdapterAndBridge`, a part of `KnowledgeBase`).

The adapter projects the visual index (set by a writer, picked up by readers on refresh). A
backend keeps it only where it can re-project its own visual index (`KeepsAdapter`: the embedded
one); on Milvus, whose vectors live in the server's collection, `set_adapter` and `adapt` are
refused with what to do instead. The bridge, for a model stack with no text tower in image space,
carries a text question into the visual index: fitted on the captioned documents' stored vectors,
kept by a backend that can (`KeepsBridge`) and refitted once the captioned documents changed by
`BRIDGE_REFIT_SHARE`; elsewhere fitted once per commit in each process.
"""

from __future__ import annotations

import logging
from typing import Any

from kira.knowledge_base.adapters import adapter_name, is_registered, registered_adapters
from kira.knowledge_base.storage import KeepsAdapter, KeepsBridge, KnowsBridgeCurrent

log = logging.getLogger(__name__)
BRIDGE_REFIT_SHARE = 0.05  # refit the text->image bridge once the captioned documents changed by this share

NO_ADAPTER = ("a domain adapter re-projects the visual index, and on the {kind} backend that index is kept by "
              "{where} itself, which kira does not rewrite; {what} on an embedded knowledge base "
              "(KnowledgeBase.create(path) and ingest the same images), or classify with "
              "kira.adapt.FewShotClassifier over kb.document_chunk_ids and the index's stored vectors")


class AdapterAndBridge:
    """The adapter and the bridge of the knowledge base `kb` (module docstring)."""

    def __init__(self, kb: Any) -> None:
        self.kb = kb

    def _refuse(self, what: str) -> None:
        storage = self.kb.storage
        if not isinstance(storage, KeepsAdapter):
            raise ValueError(NO_ADAPTER.format(kind=storage.kind, where=storage.where, what=what))

    def set_adapter(self, adapter: Any) -> None:
        """Store a domain adapter with the knowledge base and re-project the visual index.

        `adapter` has ``apply(vectors) -> vectors``, ``save(path)`` and a ``load(path)`` classmethod, and its
        class is registered in `kira.knowledge_base.adapters` (only those are imported on open: no code is
        named by the knowledge base itself). None removes the adapter. Queries in the visual space go through
        the same ``apply``. Commits. Raises ValueError for an unregistered class, and on a backend that cannot
        re-project its visual index (Milvus), saying what to do.
        """
        kb = self.kb
        kb._writable()
        self._refuse("set it")
        if adapter is not None and not is_registered(type(adapter)):
            cls = type(adapter)
            raise ValueError(f"{cls.__module__}.{cls.__qualname__} is not a registered adapter (allowed: "
                             f"{', '.join(registered_adapters())}); register it with "
                             "kira.knowledge_base.adapters.register_adapter")
        kb._ensure_dims()
        kb.storage.set_adapter(adapter, adapter_name(type(adapter)) if adapter is not None else "")
        kb.views.clear(kept=True)
        kb.commit(checkpoint=True)  # the files hold the re-projected index before any reader reloads

    def adapt(self, labels: Any, *, methods: Any = None, seed: int | None = None, **validation: Any) -> Any:
        """Adapt to the user's labelled documents (doc id -> class) without ever choosing a method that
        validation found worse than the frozen vectors; returns the `AdaptationReport`. See
        `kira.knowledge_base.kb_fewshot.adapt`. Refused (ValueError) on Milvus, as `set_adapter`."""
        from kira.knowledge_base.kb_fewshot import adapt

        self.kb._writable()
        self._refuse("adapt it with kb.adapt")
        return adapt(self.kb, labels, methods=methods, seed=seed, **validation)

    def report(self) -> Any:
        """The last `kb.adapt` report (`kira.adapt.validation.AdaptationReport`), or None."""
        from kira.knowledge_base.kb_fewshot import report_of

        return report_of(self.kb) if isinstance(self.kb.storage, KeepsAdapter) else None

    def classify(self, doc_ids: Any) -> list[str]:
        """The class `kb.adapt`'s chosen classifier gives each stored document (ValueError before `adapt`)."""
        from kira.knowledge_base.kb_fewshot import classify

        self._refuse("classify with kb.classify")
        return classify(self.kb, doc_ids)

    def fit_bridge(self) -> Any:
        """The TextToImageBridge of the knowledge base's captioned images, or None (fewer than 2, or no images).

        Fitted on (document description text vector, raw image vector) pairs of documents with a caption or
        tags; a stored bridge is loaded instead while the number of such documents is within
        `BRIDGE_REFIT_SHARE` of the number it was fitted on (a fit costs about 0.45 s at 1,000 pairs and
        1.6 s at 10,000, and a linear map fitted on 95% of the pairs is all but the same map).
        """
        from kira.models.bridge import TextToImageBridge

        kb, storage = self.kb, self.kb.storage
        dims = kb.dims()
        knows = isinstance(storage, KnowsBridgeCurrent)
        if knows and storage.bridge_current():  # stored or confirmed by the writer at this generation
            stored = storage.load_bridge()
            if stored is not None or storage.bridge_fitted_on() == 0:
                return stored
        ids = storage.rows.captioned_document_ids()
        confirm = knows and not kb.read_only and not kb._dirty
        if len(ids) < 2 or dims is None or storage.index("visual") is None:
            if confirm:
                storage.confirm_bridge(len(ids))
            return None
        keeps = isinstance(storage, KeepsBridge)
        if keeps:
            fitted_on = storage.bridge_fitted_on()
            if fitted_on >= 2 and abs(len(ids) - fitted_on) <= BRIDGE_REFIT_SHARE * fitted_on:
                stored = storage.load_bridge()
                if stored is not None:
                    if confirm:
                        storage.confirm_bridge(len(ids))
                    return stored
        bridge = TextToImageBridge()
        bridge.fit(storage.rows.vectors("text", ids, dims["text"]), storage.rows.vectors("visual", ids, dims["visual"]))
        if keeps and not kb.read_only and not kb._dirty:
            storage.save_bridge(bridge, len(ids))
        return bridge


__all__ = ["BRIDGE_REFIT_SHARE", "AdapterAndBridge"]
