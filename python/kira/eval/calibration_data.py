"""The hand-written claims the verifier floors and the critic's logistic were calibrated on.

Four domains in the style of DomainVQA-R. Each class has an evidence summary (what the
pipeline's describer writes: caption, tags, attributes) and four claims that summary
supports (a restatement, partial statements, paraphrases). `planted_claims` pairs every
summary with its own claims (supported) and with unsupported ones: the claims of the
other classes of its domain (a different finding, or the right claim citing the wrong
evidence), made-up findings of the domain, and a claim from each other domain.
`critic_pairs` pairs class questions and generic domain questions with every summary.

Kept in the library (not the tests) so the benchmark can rerun the measurement.
"""

from __future__ import annotations

from typing import NamedTuple

# domain -> class -> (summary, [supported claims])
DATA: dict[str, dict[str, tuple[str, list[str]]]] = {
 "xray": {
  "pneumonia": ("Chest X-ray, PA view: consolidation in the right lower lobe consistent with pneumonia; tags: pneumonia, opacity, consolidation; brightness 0.41, contrast 0.22",
     ["Chest X-ray showing consolidation in the right lower lobe consistent with pneumonia.",
      "The right lower lobe shows consolidation.",
      "The findings are consistent with pneumonia.",
      "This is a PA chest X-ray with an opacity from pneumonia."]),
  "cardiomegaly": ("Chest X-ray, PA view: enlarged cardiac silhouette, cardiothoracic ratio above 0.5, consistent with cardiomegaly; tags: cardiomegaly, enlarged heart",
     ["Chest X-ray showing an enlarged cardiac silhouette consistent with cardiomegaly.",
      "The cardiothoracic ratio is above 0.5.",
      "The heart is enlarged.",
      "The findings indicate cardiomegaly."]),
  "effusion": ("Chest X-ray, PA view: blunted left costophrenic angle with a fluid level, consistent with pleural effusion; tags: pleural effusion, fluid",
     ["Chest X-ray showing a blunted left costophrenic angle consistent with pleural effusion.",
      "There is a fluid level at the left costophrenic angle.",
      "The findings suggest a pleural effusion.",
      "Fluid is present in the left pleural space."]),
  "atelectasis": ("Chest X-ray, PA view: linear opacity with volume loss in the left upper lobe, consistent with atelectasis; tags: atelectasis, collapse",
     ["Chest X-ray showing a linear opacity with volume loss in the left upper lobe consistent with atelectasis.",
      "The left upper lobe shows volume loss.",
      "The findings are consistent with atelectasis.",
      "There is partial collapse of the left upper lobe."]),
  "normal": ("Chest X-ray, PA view: clear lung fields, normal cardiac silhouette, sharp costophrenic angles; no acute finding; tags: normal",
     ["Chest X-ray with clear lung fields and a normal cardiac silhouette.",
      "The costophrenic angles are sharp.",
      "There is no acute finding.",
      "The lungs are clear."]),
 },
 "circuit": {
  "amplifier": ("Circuit schematic: common-emitter amplifier with an NPN transistor, collector resistor, emitter resistor and coupling capacitors; tags: amplifier, transistor",
     ["Circuit schematic of a common-emitter amplifier with an NPN transistor.",
      "The amplifier uses coupling capacitors.",
      "The transistor has a collector resistor and an emitter resistor.",
      "This schematic shows a transistor amplifier."]),
  "filter": ("Circuit schematic: RC low-pass filter, a series resistor followed by a shunt capacitor to ground; cutoff set by R and C; tags: filter, low-pass",
     ["Circuit schematic of an RC low-pass filter.",
      "A series resistor is followed by a shunt capacitor to ground.",
      "The cutoff frequency is set by the resistor and capacitor.",
      "This is a low-pass filter."]),
  "power_supply": ("Circuit schematic: power supply with a transformer, bridge rectifier of four diodes, smoothing capacitor and voltage regulator; tags: power supply, rectifier",
     ["Circuit schematic of a power supply with a transformer and a bridge rectifier.",
      "The bridge rectifier has four diodes.",
      "A smoothing capacitor and a voltage regulator follow the rectifier.",
      "This schematic is a rectifier power supply."]),
  "oscillator": ("Circuit schematic: 555 timer astable oscillator with two resistors and a timing capacitor producing a square wave; tags: oscillator, 555 timer",
     ["Circuit schematic of a 555 timer astable oscillator.",
      "The oscillator produces a square wave.",
      "Two resistors and a timing capacitor set the frequency.",
      "This is an astable oscillator built on a 555 timer."]),
 },
 "satellite": {
  "urban": ("Satellite image: dense urban area with a street grid, buildings and rooftops, little vegetation; tags: urban, buildings; dominant colour grey",
     ["Satellite image of a dense urban area with a street grid.",
      "The area is covered by buildings and rooftops.",
      "There is little vegetation.",
      "This is an urban scene with grey rooftops."]),
  "agricultural": ("Satellite image: agricultural land with rectangular crop fields and irrigation lines; tags: agriculture, fields; dominant colours green and brown",
     ["Satellite image of agricultural land with rectangular crop fields.",
      "Irrigation lines cross the fields.",
      "The fields are green and brown.",
      "This is farmland with crops."]),
  "forest": ("Satellite image: dense forest canopy with continuous tree cover and texture, no roads; tags: forest, trees; dominant colour dark green",
     ["Satellite image of a dense forest canopy.",
      "Tree cover is continuous.",
      "There are no roads.",
      "This is a dark green forest."]),
  "water": ("Satellite image: open water body, a lake with a smooth dark surface and a shoreline; tags: water, lake; dominant colour dark blue",
     ["Satellite image of a lake with a smooth dark surface.",
      "A shoreline borders the water.",
      "The water is dark blue.",
      "This is an open water body."]),
 },
 "histo": {
  "benign": ("H&E histopathology tile: benign tissue with small uniform nuclei, low nuclear density and regular glandular architecture; tags: benign",
     ["H&E histopathology of benign tissue with small uniform nuclei.",
      "Nuclear density is low.",
      "The glandular architecture is regular.",
      "The tissue is benign."]),
  "malignant": ("H&E histopathology tile: malignant tissue with large pleomorphic nuclei, high nuclear density and mitotic figures; tags: malignant, carcinoma",
     ["H&E histopathology of malignant tissue with large pleomorphic nuclei.",
      "Nuclear density is high.",
      "Mitotic figures are present.",
      "The tissue is malignant carcinoma."]),
 },
}
FABRICATED: dict[str, list[str]] = {
 "xray": ["The patient has a fractured left clavicle.", "A pacemaker lead is visible in the right ventricle.",
          "There is a pneumothorax at the right apex.", "The scan shows a brain tumour in the frontal lobe."],
 "circuit": ["The circuit uses an operational amplifier in an inverting configuration.", "A microcontroller drives an LCD display.",
             "The schematic contains an inductor and a relay.", "The design is a digital counter built from flip-flops."],
 "satellite": ["A desert with sand dunes covers the region.", "Snow covers the mountain peaks.",
               "An airport runway crosses the image.", "A wildfire burns in the north."],
 "histo": ["The tissue shows granulomas with giant cells.", "The sample is a bone marrow aspirate.",
           "There is extensive necrosis with calcification.", "The stain highlights amyloid deposits."],
}


class PlantedClaim(NamedTuple):
    claim: str
    evidence: str  # the summary the claim cites
    supported: bool
    kind: str  # "supported" | "other_finding" | "fabricated" | "other_domain"


def planted_claims() -> list[PlantedClaim]:
    """Every (claim, cited summary) pair of the calibration set, supported and planted-unsupported."""
    out: list[PlantedClaim] = []
    for domain, classes in DATA.items():
        for name, (summary, claims) in classes.items():
            out.extend(PlantedClaim(c, summary, True, "supported") for c in claims)
            for other, (_, other_claims) in classes.items():
                if other != name:
                    out.extend(PlantedClaim(c, summary, False, "other_finding") for c in other_claims)
            out.extend(PlantedClaim(c, summary, False, "fabricated") for c in FABRICATED[domain])
            for other_domain, other_classes in DATA.items():
                if other_domain != domain:
                    first = next(iter(other_classes.values()))
                    out.append(PlantedClaim(first[1][0], summary, False, "other_domain"))
    return out


CLASS_QUESTIONS = {
    "xray": "Find chest X-rays showing {}",
    "circuit": "Which schematic is a {} circuit?",
    "satellite": "Show satellite images of {} land cover",
    "histo": "Is this tissue {}?",
}
GENERIC_QUESTIONS = {
    "xray": "What does this chest X-ray show?",
    "circuit": "What kind of circuit is this?",
    "satellite": "What land cover is in this satellite image?",
    "histo": "What does this histopathology tile show?",
}


class CriticPair(NamedTuple):
    question: str
    summary: str
    kind: str  # "relevant" | "same_domain" | "other_domain"


def critic_pairs() -> list[CriticPair]:
    """(question, summary) pairs: the class asked about, its domain's other classes, other domains."""
    out: list[CriticPair] = []
    for domain, classes in DATA.items():
        questions: list[tuple[str, str | None]] = [(CLASS_QUESTIONS[domain].format(c.replace("_", " ")), c) for c in classes]
        questions.append((GENERIC_QUESTIONS[domain], None))
        for question, asked in questions:
            for other_domain, other_classes in DATA.items():
                for name, (summary, _) in other_classes.items():
                    if other_domain != domain:
                        kind = "other_domain"
                    elif asked is None or name == asked:
                        kind = "relevant"
                    else:
                        kind = "same_domain"
                    out.append(CriticPair(question, summary, kind))
    return out
