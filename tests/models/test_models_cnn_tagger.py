"""The ImageNet tagger and the CNN in the knowledge base: labels, one pass per image, the encoder's identity."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data

from kira.models.cnn.encoder import ActivationProposer, CnnImageEncoder
from kira.models.cnn.labels import imagenet_labels
from kira.models.cnn.tagger import ImageNetTagger, TaggerConfig


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return CnnImageEncoder(cache=tmp_path_factory.mktemp("cnn"), prefer_cuda=False, threads=2)


def test_class_names_ship_with_the_package():
    labels = imagenet_labels()
    assert len(labels) == 1000 and labels[0].name == "tench" and labels[285].name == "Egyptian cat"
    assert labels[967].name == "espresso" and "tabby cat" in labels[281].words()
    from importlib import resources

    header = resources.files("kira.models.cnn").joinpath("imagenet_classes.tsv").read_text().splitlines()[:6]
    assert any("MIT License" in line for line in header) and any("WordNet" in line for line in header)


def test_tagger_labels_real_photos_and_stays_quiet_when_unsure(encoder):
    tagger = ImageNetTagger(encoder, config=TaggerConfig(threshold=0.3))
    cat = tagger.labels(data.chelsea())
    assert cat and 281 <= cat[0].index <= 285 and cat[0].probability >= 0.3
    assert tagger.label_text(data.coffee()).startswith("labels: espresso")
    probs = [lb.probability for lb in tagger.labels(data.rocket())]
    assert probs == sorted(probs, reverse=True) and all(p >= 0.3 for p in probs)
    flat = np.full((64, 64, 3), 128, np.uint8)
    strict = ImageNetTagger(encoder, config=TaggerConfig(threshold=0.99))
    assert strict.labels(flat) == [] and strict.caption(flat) == ""
    with pytest.raises(ValueError, match="threshold"):
        ImageNetTagger(encoder, config=TaggerConfig(threshold=0.0))


def test_activation_attention_finds_the_object(encoder):
    # coffee: the cup sits in the middle of a plain table; the activation peaks on it, not in a corner
    grid = ActivationProposer(encoder).propose(data.coffee())
    gh, gw = grid.shape
    peak_y, peak_x = np.unravel_index(np.argmax(grid), grid.shape)
    assert gh // 5 <= peak_y <= 4 * gh // 5 and gw // 5 <= peak_x <= 4 * gw // 5


def test_knowledge_base_with_the_cnn(tmp_path, monkeypatch, encoder):
    monkeypatch.setenv("KIRA_CACHE_DIR", str(tmp_path / "cache"))
    from kira.knowledge_base.kb import KnowledgeBase
    from kira.models import load_default

    stack = load_default(image_encoder="mobilenet_v2", threads=2)
    kb = KnowledgeBase.create(tmp_path / "kb", models=stack)
    kb.add_image(data.chelsea(), doc_id="cat")
    kb.add_image(data.coffee(), doc_id="coffee", caption="my morning cup")
    kb.commit()
    rows = kb.store.conn.execute(
        "SELECT level, description FROM chunks WHERE doc_id='cat' ORDER BY id").fetchall()
    assert rows[0][0] == "document" and "cat" in rows[0][1].split(";")[0]  # learned labels lead an uncaptioned image
    assert {r[0] for r in rows} >= {"document", "patch"}
    coffee = kb.store.conn.execute(
        "SELECT description FROM chunks WHERE doc_id='coffee' AND level='document'").fetchone()[0]
    assert coffee.startswith("my morning cup; labels: espresso")  # the user's caption comes first
    prov = kb.store.provenance("cat")
    assert prov["image_encoder"] == "mobilenet_v2-imagenet-224/1280" and prov["labels"][0]["p"] > 0.15
    assert kb.stats()["models"]["image"] == "mobilenet_v2-imagenet-224/1280"
    # every chunk's vector came from the document's single forward pass
    doc_vec = kb.store.vectors("visual", [kb.store.conn.execute(
        "SELECT id FROM chunks WHERE doc_id='cat' AND level='document'").fetchone()[0]], 1280)[0]
    np.testing.assert_allclose(doc_vec, encoder.encode([data.chelsea()])[0], atol=1e-5)
    kb.close()

    # reopened without a stack: the knowledge base loads the encoder it was built with
    kb = KnowledgeBase.open(tmp_path / "kb", read_only=True)
    assert kb.models.identity()["image"] == "mobilenet_v2-imagenet-224/1280"
    kb.close()
    # another encoder is refused with the fix named
    pixel = load_default(image_encoder="pixel")
    with pytest.raises(ValueError, match=r"built with the image encoder mobilenet_v2.*image_encoder='mobilenet_v2'"):
        KnowledgeBase.open(tmp_path / "kb", models=pixel)  # at open (issue 34.1), as the CLI and Milvus do
    kb = KnowledgeBase.open(tmp_path / "kb", read_only=True)
    with pytest.raises(ValueError, match="built with the image encoder"):
        kb.check_models(pixel)
    kb.close()
