"""What reaches ``forward`` in a batch, per data path: one table for the report and the checks.

MindSpeed-MM's registered collators build fixed batches (``mindspeed_mm/fsdp/data/dataloader/data_collator.py``);
branch b's batch is the text keys plus the media inputs read off the model's processor; branch c's is its dataset
plugin's, by convention. MIGRATION.md's "Batch keys vs forward signature" table is rendered from here
(``msmm_batch_keys``), so the keys are written down once.
"""

from __future__ import annotations

from typing import Any

TEXT_KEYS = ["input_ids", "attention_mask", "labels"]
# The registered collators' batch keys, as their collate functions write them.
COLLATOR_BATCH_KEYS: dict[str, list[str]] = {
    "qwen3vl": [*TEXT_KEYS, "position_ids", "rope_deltas", "pixel_values", "image_grid_thw", "pixel_values_videos",
                "video_grid_thw"],
    "qwen3omni": [*TEXT_KEYS, "position_ids", "rope_deltas", "pixel_values", "image_grid_thw", "pixel_values_videos",
                  "video_grid_thw", "input_features", "feature_attention_mask", "use_audio_in_video"],
    "step3_vl": [*TEXT_KEYS, "pixel_values", "patch_pixel_values", "patch_newline_mask"],
}


def _unique(keys: list[str]) -> list[str]:
    return list(dict.fromkeys(keys))


def batch_keys(facts: dict[str, Any], data_branch: str, collator_id: str) -> list[str]:
    """The keys of a batch the copy's data path builds, in the order the report lists them."""
    processor = facts.get("processor") or {}
    data_format = processor.get("data_format") or {}
    sample = processor.get("sample_format") or {"kind": "chat"}
    audio = processor.get("audio") or {}
    if data_branch == "b" and data_format.get("media"):
        return TEXT_KEYS + list(data_format["media"]["batch_keys"])
    if data_branch == "c" and sample.get("kind") == "code":
        return [*TEXT_KEYS, "pixel_values", *sample["tile_flags"]]
    if data_branch == "c" and sample.get("kind") == "context":
        return list(TEXT_KEYS)
    if data_branch == "c" and sample.get("kind") in ("method", "recipe"):
        return TEXT_KEYS + list(sample["per_sample"])
    if data_branch == "c" and processor.get("output_keys"):
        taken = set(facts.get("forward_params") or []) | {"labels"}
        return [k for k in _unique(processor["output_keys"] + audio.get("batch_keys", []) + ["labels"]) if k in taken]
    if collator_id not in COLLATOR_BATCH_KEYS:
        return []  # a collator the checkout registers but this table does not know: the report says so
    keys = list(COLLATOR_BATCH_KEYS[collator_id])
    return _unique(keys + audio.get("batch_keys", [])) if audio else keys
