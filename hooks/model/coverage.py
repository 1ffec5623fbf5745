"""Architectures this project does not cover: the copy stops before rendering, naming why and what to do.

Such a model used to render and then fail in the smoke (Florence-2: a dtype error deep in its encoder-decoder),
after files had been written and minutes spent. One table, keyed by ``model_type`` as transformers spells it
(``CONFIG_MAPPING_NAMES``), drives the stop and the "Not covered" table of docs/support.md; the check reads config.json
only, so it runs in the model_path validator and at the start of the probe, before anything is imported.
"""

from __future__ import annotations

from typing import Any

from hooks.model.loading import ProbeError

_CAPTIONING = ("a captioning or encoder-decoder model, not a chat decoder: MindSpeed-MM's FSDP2 trainer and its "
               "data path train decoder-only chat VLMs")
_QFORMER = "a Q-Former captioning/VQA model without a chat template"

# model_type -> why it is not covered. Every key is a transformers model_type (tests check the spelling).
NOT_COVERED: dict[str, str] = {
    "blip": _CAPTIONING,
    "git": _CAPTIONING,
    "pix2struct": _CAPTIONING,
    "udop": _CAPTIONING,
    "florence2": _CAPTIONING,
    "vision-encoder-decoder": _CAPTIONING,
    "blip-2": _QFORMER,
    "instructblip": _QFORMER,
    "idefics": "the Flamingo-style Idefics v1, superseded by idefics2/idefics3 (both covered)",
    "kosmos-2.5": "an OCR model with its own prompt format, not chat",
    "shieldgemma2": "a safety classifier on Gemma 3, not a training target (migrate the Gemma 3 model itself)",
    "evolla": "a protein-language model, not vision",
    "vipllava": "a LLaVA layout with multi-layer visual prompts that this project does not build yet",
}

WHAT_TO_DO = ("msmm-migrate does not migrate it; give a decoder-only chat VLM's folder, or write the MindSpeed-MM "
              "plugin by hand")


def not_covered_error(raw: dict[str, Any]) -> str:
    """The one-line reason the copy stops for this config.json, or "" when its model_type is covered."""
    model_type = str(raw.get("model_type") or "")
    reason = NOT_COVERED.get(model_type)
    if reason is None:
        return ""
    return f"model_path: model_type {model_type!r} is not covered: {reason}; {WHAT_TO_DO}"


def check_covered(raw: dict[str, Any]) -> None:
    """Raise ``ProbeError`` (copier shows it as ``error: model_path: ...``) for a model_type not covered."""
    message = not_covered_error(raw)
    if message:
        raise ProbeError(message)
