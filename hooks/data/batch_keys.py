"""What reaches ``forward`` in a batch, per data path: one table for the report and the checks.

MindSpeed-MM's registered collators build fixed batches (``mindspeed_mm/fsdp/data/dataloader/data_collator.py``);
branch b's batch is the text keys plus the media inputs read off the model's processor; branch c's is its dataset
plugin's, by convention. MIGRATION.md's "Batch keys vs forward signature" table is rendered from here
(``msmm_batch_keys``), so the keys are written down once.
"""

from __future__ import annotations

from hooks.model.facts import ModelFacts

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


def batch_keys(facts: ModelFacts, data_branch: str, collator_id: str) -> list[str]:
    """The keys of a batch the copy's data path builds, in the order the report lists them."""
    proc = facts.processor
    media, kind, audio = proc.media_format, proc.form.kind or "chat", proc.audio_facts
    audio_keys = audio.batch_keys if audio else []
    if data_branch == "b" and media:
        return TEXT_KEYS + list(media.batch_keys)
    if data_branch == "c" and kind == "code":
        return [*TEXT_KEYS, "pixel_values", *proc.form.tile_flags]
    if data_branch == "c" and kind == "context":
        return list(TEXT_KEYS)
    if data_branch == "c" and kind in ("method", "recipe"):
        return TEXT_KEYS + list(proc.form.per_sample)
    if data_branch == "c" and proc.output_keys:
        taken = set(facts.forward_params) | {"labels"}
        return [k for k in _unique(proc.output_keys + audio_keys + ["labels"]) if k in taken]
    if collator_id not in COLLATOR_BATCH_KEYS:
        return []  # a collator the checkout registers but this table does not know: the report says so
    keys = list(COLLATOR_BATCH_KEYS[collator_id])
    return _unique(keys + audio_keys) if audio else keys
