"""Chest radiographs: five conditions, PA + lateral views (multiview) and follow-ups (temporal).

Each image is drawn from anatomy: a soft-tissue torso, two dark lung fields bounded by
diaphragm domes, a bright spine and mediastinum, ribs and clavicles, and the cardiac
silhouette. Conditions change that anatomy the way they change a film: pneumonia adds
patchy air-space opacity in a lower zone, cardiomegaly widens the heart (cardiothoracic
ratio > 0.55), pleural effusion fills a costophrenic angle with a meniscus-shaped fluid
level, atelectasis adds a plate-like opacity with volume loss (raised hemidiaphragm,
mediastinal shift). Each patient has a PA and a lateral view at baseline and two PA
follow-ups whose severity improves, stays or worsens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from kira.eval.dataset import BuildSize, Document, DomainDataset, Question
from kira.eval.domainvqa._common import (
    IMAGE_SIZE,
    caption_style,
    ellipse,
    gray_to_rgb,
    grid,
    question_split,
    smooth_noise,
    spread,
)

LABELS = ("pneumonia", "cardiomegaly", "pleural effusion", "atelectasis", "normal")
CONCEPTS = (
    "pneumonia", "lobar consolidation", "air bronchograms", "airspace opacity",
    "cardiomegaly", "enlarged cardiac silhouette", "cardiothoracic ratio",
    "pleural effusion", "blunted costophrenic angle", "meniscus sign", "fluid level",
    "atelectasis", "volume loss", "elevated hemidiaphragm", "mediastinal shift",
    "plate-like opacity", "clear lungs", "normal cardiomediastinal silhouette",
    "PA view", "lateral view", "follow-up radiograph", "interval change",
)
PROGRESSIONS = ("improving", "stable", "worsening")
_SEVERITY = {"improving": (1.0, 0.78, 0.55), "stable": (0.85, 0.85, 0.85), "worsening": (0.6, 0.8, 1.0)}
_STUDY_MONTHS = (0, 3, 6)


@dataclass(frozen=True)
class _Patient:
    pid: str
    condition: str
    side: str  # "right" | "left" (the patient's side; the patient's right is the image's left on PA)
    progression: str
    body: float  # torso half-width
    lung: float  # lung size factor
    heart: float  # heart size factor (cardiomegaly > 1.4)
    exposure: float  # film brightness
    rib_phase: float
    year: int


def _findings(p: _Patient, severity: float) -> tuple[str, str, str]:
    """(findings sentence, impression, short finding) for a patient at a severity."""
    s = p.side
    if p.condition == "pneumonia":
        return (f"patchy airspace consolidation in the {s} lower zone with air bronchograms",
                f"{s} lower lobe pneumonia", "airspace consolidation")
    if p.condition == "cardiomegaly":
        ctr = 0.5 + 0.1 * p.heart
        return (f"enlarged cardiac silhouette, cardiothoracic ratio about {ctr:.2f}; lungs clear",
                "cardiomegaly", "enlarged cardiac silhouette")
    if p.condition == "pleural effusion":
        return (f"blunting of the {s} costophrenic angle with a meniscus-shaped fluid level",
                f"{s} pleural effusion", "pleural fluid with a meniscus")
    if p.condition == "atelectasis":
        return (f"plate-like linear opacity in the {s} lower zone with volume loss and elevation "
                f"of the {s} hemidiaphragm", f"{s} basal atelectasis", "plate-like opacity with volume loss")
    return ("clear lungs, normal cardiomediastinal silhouette, no effusion or pneumothorax",
            "no acute cardiopulmonary abnormality", "clear lungs")


def _patient(rng: np.random.Generator, pid: str, condition: str) -> _Patient:
    progression = "stable" if condition in ("normal", "cardiomegaly") else str(rng.choice(PROGRESSIONS))
    heart = float(rng.uniform(1.45, 1.7)) if condition == "cardiomegaly" else float(rng.uniform(0.85, 1.05))
    return _Patient(
        pid=pid, condition=condition, side=str(rng.choice(("right", "left"))), progression=progression,
        body=float(rng.uniform(0.8, 0.92)), lung=float(rng.uniform(0.9, 1.08)), heart=heart,
        exposure=float(rng.uniform(0.9, 1.1)), rib_phase=float(rng.uniform(0, 0.06)),
        year=int(rng.integers(2019, 2025)),
    )


def render(p: _Patient, view: str, severity: float, rng: np.random.Generator, size: int = IMAGE_SIZE) -> np.ndarray:
    """Draw one radiograph of patient `p` in `view` ("PA" | "lateral") at `severity` (0..1)."""
    xx, yy = grid(size)
    img = 0.05 + 0.38 * ellipse(xx, yy, 0.0, 0.15, p.body, 1.05, soft=0.15)
    cond, sev = p.condition, severity
    # the patient's right is the image's left on a PA film
    sx = -1.0 if p.side == "right" else 1.0
    if view == "PA":
        lift = {"right": 0.0, "left": 0.0}
        if cond == "atelectasis":
            lift[p.side] = 0.12 * sev
        lungs = np.zeros_like(img)
        thorax = {}
        for side, cx in (("right", -0.38), ("left", 0.38)):
            rx = 0.27 * p.lung * (0.85 if cond == "atelectasis" and side == p.side else 1.0)
            field = ellipse(xx, yy, cx * p.body / 0.86, -0.08, rx, 0.58 * p.lung, soft=0.08)
            thorax[side] = ellipse(xx, yy, cx * p.body / 0.86, -0.04, rx * 1.05, 0.6 * p.lung, soft=0.08)
            dome = 0.42 - lift[side] - 0.12 * (1 - ((xx - cx) / 0.3) ** 2)
            field *= np.clip((dome - yy) / 0.05, 0, 1)
            lungs = np.maximum(lungs, field)
        img = img * (1 - 0.75 * lungs)
        # ribs: curved bright bands across the lung fields
        for k in range(9):
            y0 = -0.62 + k * 0.12 + p.rib_phase
            curve = y0 + 0.22 * (np.abs(xx) - 0.35) ** 2 - 0.05 * np.abs(xx)
            img += 0.10 * lungs * np.exp(-((yy - curve) / 0.018) ** 2)
        # clavicles
        for s in (-1, 1):
            curve = -0.7 + 0.12 * (xx * s - 0.3) ** 2
            img += 0.22 * (np.abs(xx) < 0.6) * (xx * s > 0.02) * np.exp(-((yy - curve) / 0.025) ** 2)
        # spine and mediastinum
        shift = 0.06 * sev * sx if cond == "atelectasis" else 0.0
        img += 0.30 * np.exp(-((xx - shift) / 0.07) ** 2) * (yy > -0.9)
        # heart: towards the patient's left (image right)
        hw = 0.25 * p.heart
        img += 0.3 * ellipse(xx, yy, 0.09 + 0.35 * (p.heart - 1) * 0.5 + shift, 0.28, hw, 0.2 + 0.03 * p.heart, soft=0.3)
        if cond == "pneumonia":
            texture = np.clip(smooth_noise(rng, size, 3.0) * 0.5 + 0.6, 0, 1)
            blob = ellipse(xx, yy, 0.38 * sx, 0.18, 0.17 + 0.05 * sev, 0.16 + 0.04 * sev, soft=0.6)
            img += 0.5 * sev * blob * texture * lungs
        elif cond == "pleural effusion":
            level = 0.32 - 0.25 * sev
            meniscus = level - 0.18 * np.clip((xx * sx - 0.2) / 0.45, 0, 1)
            fluid = np.clip((yy - meniscus) / 0.03, 0, 1) * thorax[p.side]
            img = img * (1 - 0.6 * fluid) + 0.5 * fluid
        elif cond == "atelectasis":
            band = np.exp(-((yy - (0.22 - 0.12 * sev) - 0.1 * (xx * sx - 0.38)) / 0.035) ** 2)
            img += 0.35 * sev * band * (xx * sx > 0.12) * (xx * sx < 0.65) * lungs
    else:  # lateral: one lung profile, spine posterior (image right), heart anterior (image left)
        field = ellipse(xx, yy, 0.02, -0.05, 0.58 * p.lung, 0.62 * p.lung, soft=0.08)
        dome = 0.45 - 0.1 * (1 - ((xx - 0.05) / 0.6) ** 2)
        if cond == "atelectasis":
            dome -= 0.08 * sev
        field *= np.clip((dome - yy) / 0.05, 0, 1)
        img = img * (1 - 0.7 * field)
        for k in range(10):
            xk = 0.46 + 0.02 * k
            img += 0.06 * np.exp(-((xx - xk) / 0.015) ** 2) * (np.abs(yy + 0.6 - 0.13 * k) < 0.05)
        img += 0.32 * np.exp(-((xx - 0.62) / 0.06) ** 2) * (yy > -0.95)  # thoracic spine
        img += 0.18 * np.exp(-((xx + 0.55) / 0.04) ** 2) * (np.abs(yy + 0.05) < 0.45)  # sternum
        img += 0.28 * ellipse(xx, yy, -0.22 - 0.05 * (p.heart - 1), 0.22, 0.22 * p.heart, 0.24, soft=0.3)
        if cond == "pneumonia":
            texture = np.clip(smooth_noise(rng, size, 3.0) * 0.5 + 0.6, 0, 1)
            img += 0.45 * sev * ellipse(xx, yy, 0.22, 0.2, 0.2 + 0.05 * sev, 0.16, soft=0.6) * texture * field
        elif cond == "pleural effusion":
            level = 0.32 - 0.2 * sev
            meniscus = level - 0.2 * np.clip((xx - 0.1) / 0.45, 0, 1)
            thorax_lat = ellipse(xx, yy, 0.02, -0.02, 0.6 * p.lung, 0.64 * p.lung, soft=0.08)
            fluid = np.clip((yy - meniscus) / 0.03, 0, 1) * thorax_lat * (xx > -0.1)
            img = img * (1 - 0.6 * fluid) + 0.5 * fluid
        elif cond == "atelectasis":
            band = np.exp(-((yy - 0.15 + 0.25 * (xx - 0.1)) / 0.04) ** 2) * (np.abs(xx - 0.1) < 0.35)
            img += 0.3 * sev * band * field
    img = ndimage.gaussian_filter(img, 1.0)
    img = img * p.exposure + 0.025 * smooth_noise(rng, size, 0.7)
    return gray_to_rgb(np.clip(img, 0, 1) ** 0.9)


def _caption(rng: np.random.Generator, p: _Patient, view: str, study: int, severity: float) -> str:
    findings, impression, _ = _findings(p, severity)
    month = _STUDY_MONTHS[study]
    date = f"{p.year}-{1 + month:02d}-{1 + (int(p.rib_phase * 1e4) + 7 * study) % 27:02d}"
    head = f"{view} chest radiograph, patient {p.pid}, study {study + 1} ({date})"
    if study > 0:
        head += ", follow-up"
    style = caption_style(rng)
    if style == "full":
        return f"{head}. Findings: {findings}. Impression: {impression}."
    if style == "findings":
        return f"{head}. {findings[0].upper()}{findings[1:]}."
    return f"{head}. Reported by {rng.choice(('Dr. Osei', 'Dr. Lindqvist', 'Dr. Tanaka', 'Dr. Moreau'))}."


_RETRIEVAL = {
    "pneumonia": ("Find chest X-rays showing pneumonia.", "Which radiographs show lobar consolidation from pneumonia?"),
    "cardiomegaly": ("Find chest X-rays showing cardiomegaly.", "Which radiographs show an enlarged heart?"),
    "pleural effusion": ("Find chest X-rays with a pleural effusion.", "Which radiographs show fluid in the pleural space?"),
    "atelectasis": ("Find chest X-rays showing atelectasis.", "Which radiographs show collapse with volume loss (atelectasis)?"),
    "normal": ("Find normal chest X-rays.", "Which radiographs show no acute cardiopulmonary abnormality (normal)?"),
}
_RETRIEVAL_ANSWER = {
    "pneumonia": "Radiographs with patchy airspace consolidation and air bronchograms, consistent with pneumonia.",
    "cardiomegaly": "Radiographs with an enlarged cardiac silhouette, cardiothoracic ratio above 0.55: cardiomegaly.",
    "pleural effusion": "Radiographs with blunting of the costophrenic angle and a meniscus-shaped fluid level: pleural effusion.",
    "atelectasis": "Radiographs with plate-like opacity, volume loss and an elevated hemidiaphragm: atelectasis.",
    "normal": "Radiographs with clear lungs and a normal cardiomediastinal silhouette: no acute cardiopulmonary abnormality.",
}
_VISUAL = (
    "What is the most likely diagnosis on this chest radiograph?",
    "Describe the key finding on this radiograph and its likely cause.",
    "What abnormality, if any, does this chest X-ray show?",
)


def build(seed: int, size: BuildSize) -> DomainDataset:
    """The x-ray domain: size.documents radiographs (4 per patient) and size.questions questions."""
    rng = np.random.default_rng(seed)
    n_patients = max(1, -(-size.documents // 4))
    docs: list[Document] = []
    temporal: list[tuple[str, ...]] = []
    multiview: list[tuple[str, ...]] = []
    patients: list[_Patient] = []
    for i, condition in enumerate(spread(n_patients, LABELS)):
        p = _patient(rng, f"P{i + 1:03d}", condition)
        patients.append(p)
        sev = _SEVERITY[p.progression]
        shots = (("PA", 0), ("lateral", 0), ("PA", 1), ("PA", 2))
        ids = []
        for view, study in shots:
            doc_id = f"xray-{p.pid}-{'pa' if view == 'PA' else 'lat'}-t{study}"
            ids.append(doc_id)
            docs.append(Document(
                doc_id=doc_id, domain="xray", image=render(p, view, sev[study], rng),
                caption=_caption(rng, p, view, study, sev[study]), label=condition,
                attributes={"view": view, "study": str(study + 1), "side": p.side, "progression": p.progression,
                            "patient": p.pid},
                tags=("chest", "radiograph", view.lower()), group=p.pid,
            ))
        temporal.append((ids[0], ids[2], ids[3]))
        multiview.append((ids[0], ids[1]))
    docs = docs[: size.documents]
    kept = {d.doc_id for d in docs}
    temporal = [g for g in temporal if all(i in kept for i in g)]
    multiview = [g for g in multiview if all(i in kept for i in g)]
    by_label = {lab: tuple(d.doc_id for d in docs if d.label == lab) for lab in LABELS}

    n_ret, n_vis, n_hop = question_split(size.questions)
    questions: list[Question] = []
    for i, lab in enumerate(spread(n_ret, LABELS)):
        text = _RETRIEVAL[lab][(i // len(LABELS)) % 2]
        questions.append(Question(f"xray-r{i:03d}", "xray", "retrieval", text, _RETRIEVAL_ANSWER[lab], by_label[lab], lab))
    for i, lab in enumerate(spread(n_vis, LABELS)):
        q = _patient(rng, f"Q{i + 1:03d}", lab)
        view = "PA" if i % 3 else "lateral"
        findings, impression, _ = _findings(q, 0.9)
        questions.append(Question(
            f"xray-v{i:03d}", "xray", "visual", _VISUAL[i % len(_VISUAL)],
            f"{findings[0].upper()}{findings[1:]}; impression: {impression}.", by_label[lab], lab,
            query_image=render(q, view, 0.9, rng)))
    hop_patients = [patients[int(j)] for j in rng.permutation(len(patients))] if patients else []
    usable_t = {g[0].split("-")[1]: g for g in temporal}
    usable_m = {g[0].split("-")[1]: g for g in multiview}
    for i in range(n_hop):
        p = hop_patients[i % len(hop_patients)]
        _, impression, short = _findings(p, 1.0)
        if i % 2 == 0 and p.pid in usable_t:
            g = usable_t[p.pid]
            change = {"improving": "decreased", "stable": "remained unchanged", "worsening": "increased"}[p.progression]
            if p.condition == "normal":
                answer = "Both studies show clear lungs and a normal cardiomediastinal silhouette; no interval change."
            else:
                answer = (f"Compared with the baseline study, the {short} has {change}, "
                          f"consistent with {p.progression} {impression}.")
            text = f"Compare the latest follow-up radiograph of patient {p.pid} (study 3) with the baseline study: how has it changed?"
            questions.append(Question(f"xray-m{i:03d}", "xray", "multihop", text, answer, (g[0], g[2]), p.condition))
        elif p.pid in usable_m:
            g = usable_m[p.pid]
            text = f"Patient {p.pid} had PA and lateral views at the baseline study: what do the two views together show?"
            answer = f"Both the PA and the lateral view show {short}, consistent with {impression}."
            questions.append(Question(f"xray-m{i:03d}", "xray", "multihop", text, answer, g, p.condition))
    return DomainDataset(
        name="xray", documents=tuple(docs), questions=tuple(questions), concept_bank=CONCEPTS, labels=LABELS,
        temporal_groups=tuple(temporal), multiview_groups=tuple(multiview),
        description="Chest radiographs: pneumonia, cardiomegaly, pleural effusion, atelectasis, normal; PA + lateral, follow-ups.",
    )
