"""Tier 1: the smoke's proof that every medium of the data reached ``forward`` and its tower got a gradient.

The pure functions of ``hooks.smoke.media_proof`` over hand-made batches, gradient norms and records (the
parameter names are the releases' own: Qwen2.5-VL's ``model.visual``, Qwen2-Audio's ``audio_tower``); the
real trainer's run is tier 2 (``tests/test_loss_equivalence.py``: the clean scaffold and a collator that
loses ``pixel_values``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hooks.smoke.media_proof import (
    BatchInput,
    DataMedium,
    RealItem,
    Seen,
    connector,
    data_media,
    describe_batch,
    media_findings,
    media_hint,
    prove_media,
    real_items,
    record_files,
    tower,
    trained_at,
)

TEXT = [BatchInput("attention_mask", [1, 40], 1, 40, False), BatchInput("input_ids", [1, 40], 1, 40, False),
        BatchInput("labels", [1, 40], 1, 40, False)]
PIXELS = BatchInput("pixel_values", [16, 1176], 1, 16 * 1176, True)
GRID = BatchInput("image_grid_thw", [1, 3], 1, 3, False)
FEATURES = BatchInput("input_features", [2, 128, 400], 1, 2 * 128 * 400, True)
FEATURE_MASK = BatchInput("feature_attention_mask", [2, 400], 1, 800, False)
VIDEO = BatchInput("pixel_values_videos", [32, 1176], 1, 32 * 1176, True)

VL_GRADS = {"model.visual.blocks.0.attn.qkv.weight": 3e-3, "model.visual.merger.mlp.0.weight": 4e-3,
            "model.language_model.layers.0.mlp.up_proj.weight": 0.5, "lm_head.weight": 1.0}
AUDIO_GRADS = {"audio_tower.layers.0.self_attn.q_proj.weight": 6e-3, "audio_tower.conv1.weight": 8e-3,
               "multi_modal_projector.linear.weight": 2e-2, "language_model.lm_head.weight": 1.0}


def _data(medium: str, files: int, records: int | None = None, total: int = 8) -> dict[str, DataMedium]:
    return {medium: DataMedium(medium, files, files, files if records is None else records, total)}


# --- the data ---------------------------------------------------------------------------------------------


def test_the_data_counts_files_placeholders_and_records_per_medium() -> None:
    records = [{"messages": [{"role": "user", "content": "<image><image>Compare."}, {"role": "assistant",
                                                                                   "content": "Same."}],
                "images": ["a.png", "b.png"]},
               {"messages": [{"role": "user", "content": "<audio>What pitch?"}], "audios": "tone.wav"},
               {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}]
    found = data_media(records, record_files({"data": {"dataset_param": {"attr": {"images": "images"}}}}))
    assert found["image"] == DataMedium("image", 2, 2, 1, 3)
    assert found["audio"] == DataMedium("audio", 1, 1, 1, 3)  # a string names one file, as FieldMap reads it
    assert not found["video"].present
    assert found["image"].named() == "the data names 2 image files"
    assert DataMedium("audio", 0, 3, 3, 3).named() == "the data's text has 3 <audio> placeholders"


def test_branch_c_records_are_read_through_the_yamls_data_fields() -> None:
    cfg = {"data": {"dataset_param": {"data_fields": {"images": "img", "audios": "snd", "prompt": "q",
                                                      "response": "a"}}}}
    records = [{"img": "x.png", "q": "What is it?", "a": "A cat."}, {"snd": ["t1.wav", "t2.wav"], "q": "?", "a": "!"}]
    found = data_media(records, record_files(cfg))
    assert (found["image"].files, found["audio"].files, found["audio"].records) == (1, 2, 1)
    assert found["image"].placeholders == 0  # the processor places the image: no mark in the text


# --- the batch --------------------------------------------------------------------------------------------


def test_a_batch_is_described_without_its_values() -> None:
    batch = {"input_ids": torch.zeros(1, 7, dtype=torch.long), "pixel_values": torch.ones(4, 12),
             "image_patches": [torch.ones(3, 5), torch.ones(2, 5)], "use_audio_in_video": False,
             "input_features": torch.zeros(0, 128, 400)}
    described = {d["key"]: BatchInput(**d) for d in json.loads(json.dumps(describe_batch(batch)))}
    assert sorted(described) == ["image_patches", "input_features", "input_ids", "pixel_values"]
    assert described["pixel_values"] == BatchInput("pixel_values", [4, 12], 1, 48, True)
    assert described["image_patches"] == BatchInput("image_patches", None, 2, 25, True)
    assert described["input_ids"].floating is False
    assert described["input_features"].numel == 0  # present but empty: no arrival


# --- the verdict ------------------------------------------------------------------------------------------


def _find(data: dict[str, DataMedium], batches: dict[int, list[BatchInput]], grads: dict[str, float],
          no_grad: dict[str, bool] | None, freeze: list[str], zero: dict[str, bool] | None = None,
          step: int = 1) -> tuple[list[str], list[str], list[str]]:
    """``media_findings`` where each medium's first real item is record 1 on the first rank at ``step``."""
    real = {medium: RealItem(medium, 0, step, min(batches)) for medium in data}
    return media_findings(data, {step: Seen(batches, grads, no_grad)}, freeze, real, zero)


def test_each_medium_that_reached_forward_with_a_trained_tower_is_verified() -> None:
    batches = {0: [*TEXT, GRID, PIXELS], 1: [*TEXT, GRID, PIXELS]}
    problems, verified, unknown = _find(_data("image", 8), batches, VL_GRADS, {}, [])
    assert problems == [] and unknown == []
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0, 2 ranks in all; a real one: "
                        "record 1) and model.visual got a gradient (norm 5.0e-03) at step 1"]


def test_audio_is_verified_in_the_briefs_words() -> None:
    _, verified, _ = _find(_data("audio", 4), {0: [*TEXT, FEATURES, FEATURE_MASK]}, AUDIO_GRADS, {}, [])
    assert verified == ["audio reached forward (input_features [2, 128, 400] on rank 0; a real one: record 1) and "
                        "audio_tower got a gradient (norm 1.0e-02) at step 1"]


def test_data_with_audio_but_no_audio_input_in_forward_fails() -> None:
    problems, verified, _ = _find(_data("audio", 4), {0: TEXT, 1: TEXT}, AUDIO_GRADS, {}, [])
    assert verified == []
    assert problems == ["audio: the data names 4 audio files but no audio input reached forward at step 1 on rank 0, "
                        "which trains record 1's (batch keys: [attention_mask, input_ids, labels]): the model trained "
                        "on the placeholder's text"]
    assert "batch keys" in media_hint(problems)


def test_image_metadata_without_pixels_is_no_arrival() -> None:
    """A collator that lost ``pixel_values`` keeps ``image_grid_thw``: a grid is no image."""
    problems, _, _ = _find(_data("image", 8), {0: [*TEXT, GRID]}, VL_GRADS, {}, [])
    assert len(problems) == 1 and "no image input reached forward at step 1" in problems[0]
    assert "[attention_mask, image_grid_thw, input_ids, labels]; image_grid_thw holds no image content" in problems[0]


def test_a_tower_and_connector_without_gradient_fail_naming_both_and_the_hint_names_the_loss() -> None:
    grads = {k: 0.0 if "audio_tower" in k or "projector" in k else v for k, v in AUDIO_GRADS.items()}
    problems, verified, _ = _find(_data("audio", 4), {0: [*TEXT, FEATURES]}, grads, {}, [])
    assert verified == []
    assert problems == ["audio: input_features reached forward (input_features [2, 128, 400] on rank 0; a real one: "
                        "record 1) but neither audio_tower nor multi_modal_projector got a gradient at step 1: the "
                        "audio's features did not reach the loss"]
    hint = media_hint(problems)
    assert "batch keys" not in hint.lower() and "placeholder tokens" in hint


def test_a_trainable_tower_that_forward_never_used_fails() -> None:
    """No gradient at all (None): the parameters are in the observer's list of those without one."""
    grads = {k: v for k, v in VL_GRADS.items() if "visual" not in k}
    no_grad = {"model.visual.blocks.0.attn.qkv.weight": True, "model.visual.merger.mlp.0.weight": True}
    problems, _, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, no_grad, [])
    assert problems == ["image: pixel_values reached forward (pixel_values [16, 1176] on rank 0; a real one: record "
                        "1) but model.visual got none at step 1: the image's features did not reach the loss"]


def test_a_non_finite_tower_gradient_fails() -> None:
    grads = {**VL_GRADS, "model.visual.merger.mlp.0.weight": float("nan")}
    problems, _, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, {}, [])
    assert problems == ["image: pixel_values reached forward but model.visual's step-1 gradient is not finite "
                        "(norm nan)"]


GEMMA_GRADS = {"model.vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight": 0.0,
               "model.multi_modal_projector.mm_input_projection_weight": 3e-2,
               "model.multi_modal_projector.mm_soft_emb_norm.weight": 0.0,
               "model.language_model.layers.0.mlp.up_proj.weight": 0.5}


def test_a_zero_connector_passes_with_a_note_not_a_failure() -> None:
    """Gemma 3 as from_config leaves it: the projection is zeros, so the tower upstream gets exactly no gradient,
    while the image changes the loss through the projection's own gradient."""
    zero = {"model.multi_modal_projector.mm_input_projection_weight": True}
    problems, verified, unknown = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, GEMMA_GRADS, {}, [], zero)
    assert problems == [] and unknown == []
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1) and "
                        "model.multi_modal_projector got a gradient (norm 3.0e-02) at step 1, model.vision_tower "
                        "none: note: model.multi_modal_projector's weights are all zero (a fresh connector, as "
                        "from_config leaves it), so no gradient flows back past it into model.vision_tower until "
                        "it has trained; the image changed the loss through model.multi_modal_projector's own "
                        "gradient"]


def test_a_non_zero_connector_that_trained_while_its_tower_got_none_fails() -> None:
    zero = {"model.multi_modal_projector.mm_input_projection_weight": False}
    problems, verified, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, GEMMA_GRADS, {}, [], zero)
    assert verified == [] and len(problems) == 1
    assert "model.vision_tower's parameters got none though model.multi_modal_projector's weights are not zero" in \
        problems[0]
    _, _, unknown = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, GEMMA_GRADS, {}, [], None)
    assert unknown and "was not recorded" in unknown[0]  # could not evaluate, never a verdict


def test_a_frozen_tower_with_a_training_connector_is_verified_by_the_connector() -> None:
    grads = {k: v for k, v in GEMMA_GRADS.items() if "vision_tower" not in k}
    no_grad = {"model.vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight": False}
    problems, verified, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, no_grad, ["model.vision_tower"])
    assert problems == []
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1) and "
                        "model.multi_modal_projector got a gradient (norm 3.0e-02) at step 1; model.vision_tower is "
                        "frozen (model.freeze: model.vision_tower)"]


def test_a_frozen_tower_is_reported_frozen_not_failed() -> None:
    grads = {k: v for k, v in VL_GRADS.items() if "visual" not in k}
    no_grad = {"model.visual.blocks.0.attn.qkv.weight": False, "model.visual.merger.mlp.0.weight": False}
    problems, verified, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, no_grad, ["model.visual"])
    assert problems == []
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1); "
                        "model.visual is frozen (model.freeze: model.visual): it takes no gradient, as the YAML says"]


def test_a_partly_frozen_tower_is_judged_on_its_trainable_parameters() -> None:
    grads = {k: v for k, v in VL_GRADS.items() if "blocks" not in k}
    no_grad = {"model.visual.blocks.0.attn.qkv.weight": False}
    _, verified, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, no_grad, ["model.visual.blocks"])
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1) and "
                        "model.visual got a gradient (norm 4.0e-03; 1 of its parameters frozen) at step 1"]


def test_a_model_without_a_separate_tower_says_so() -> None:
    """Patches fed to the language model through a linear layer (as Fuyu does): nothing named a tower."""
    grads = {"model.patch_embed.weight": 0.2, "model.layers.0.mlp.up_proj.weight": 0.5, "lm_head.weight": 1.0}
    problems, verified, unknown = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, {}, [])
    assert problems == [] and unknown == []
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1); the model "
                        "has no separate vision tower (its other layers take the image input directly): no tower "
                        "gradient to check"]


def test_a_vq_tokenizer_takes_no_gradient_by_design() -> None:
    """Chameleon and Emu3: the image becomes discrete tokens through ``vqmodel.quantize`` (an argmin)."""
    grads = {"model.embed_tokens.weight": 0.3, "lm_head.weight": 1.0}
    no_grad = {"model.vqmodel.encoder.conv_in.weight": True, "model.vqmodel.quantize.embedding.weight": True,
               "model.vqmodel.quant_conv.weight": True}
    problems, verified, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, no_grad, [])
    assert problems == []
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1); "
                        "model.vqmodel turns it into discrete tokens (a vector quantizer: no gradient flows into it, "
                        "by design), which the language model trains on: no tower gradient to check"]


def test_only_the_towers_that_trained_are_named() -> None:
    """Janus: the SigLIP understanding tower trains, the VQ generation path has no gradient in understanding."""
    grads = {"model.vision_model.encoder.layers.0.mlp.fc1.weight": 2e-3, "lm_head.weight": 1.0}
    no_grad = {"model.vqmodel.quantize.embedding.weight": True, "model.vqmodel.encoder.conv_in.weight": True}
    _, verified, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, no_grad, [])
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1) and "
                        "model.vision_model got a gradient (norm 2.0e-03) at step 1"]
    found = tower("vision", grads, no_grad)
    assert found.roots == ["model.vision_model", "model.vqmodel"] and found.discrete == ["model.vqmodel"]


def test_a_vq_tower_beside_an_untrained_continuous_one_still_fails() -> None:
    no_grad = {"model.vision_model.encoder.layers.0.mlp.fc1.weight": True,
               "model.vqmodel.quantize.embedding.weight": True}
    problems, _, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, {"lm_head.weight": 1.0}, no_grad, [])
    assert len(problems) == 1
    assert "but model.vision_model and model.vqmodel got none at step 1: the image's features" in problems[0]


def test_without_the_list_of_parameters_lacking_a_gradient_no_tower_is_not_evaluated() -> None:
    grads = {k: v for k, v in VL_GRADS.items() if "visual" not in k}
    problems, verified, unknown = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, grads, None, [])
    assert problems == [] and verified == []
    assert unknown and "could not be evaluated" in unknown[0]


def test_videos_train_the_vision_tower() -> None:
    data = {**_data("image", 4), **_data("video", 2)}
    problems, verified, _ = _find(data, {0: [*TEXT, PIXELS, VIDEO]}, VL_GRADS, {}, [])
    assert problems == []
    assert [line.split(" reached")[0] for line in verified] == ["image", "video"]
    assert "pixel_values_videos [32, 1176]" in verified[1] and "model.visual got a gradient" in verified[1]


def test_data_without_video_is_not_asked_for_video() -> None:
    problems, verified, _ = _find(_data("image", 8), {0: [*TEXT, PIXELS]}, VL_GRADS, {}, [])
    assert problems == [] and len(verified) == 1


def test_each_medium_is_proven_at_the_step_where_its_first_real_item_is_trained() -> None:
    """Mixed media: step 1 holds audio on both ranks and the collator's masked stand-in image (no gradient into
    the vision tower); the image record is trained at step 2 on rank 1, where the vision tower trains. No stand-in
    caveat is left: the proof rests on the real item."""
    step1 = Seen({0: [*TEXT, PIXELS, FEATURES], 1: [*TEXT, PIXELS, FEATURES]},
                 {**AUDIO_GRADS, "visual.blocks.0.attn.qkv.weight": 0.0}, {})
    step2 = Seen({0: [*TEXT, PIXELS, FEATURES], 1: [*TEXT, PIXELS, FEATURES]},
                 {**AUDIO_GRADS, "visual.blocks.0.attn.qkv.weight": 7e-3}, {})
    data = {**_data("audio", 9, total=11), **_data("image", 1, total=11)}
    real = {"audio": RealItem("audio", 0, 1, 0), "image": RealItem("image", 3, 2, 1)}
    problems, verified, unknown = media_findings(data, {1: step1, 2: step2}, [], real, {})
    assert problems == [] and unknown == []
    assert verified[0].startswith("image reached forward (pixel_values [16, 1176] on rank 1, 2 ranks in all; a real "
                                  "one: record 4) and visual got a gradient (norm 7.0e-03) at step 2")
    assert verified[1].startswith("audio reached forward (input_features [2, 128, 400] on rank 0, 2 ranks in all; a "
                                  "real one: record 1) and audio_tower got a gradient")


def test_a_medium_whose_records_lie_past_the_smokes_steps_is_not_verified_never_failed() -> None:
    data = {**_data("audio", 20, total=21), **_data("image", 1, total=21)}
    real = {"audio": RealItem("audio", 0, 1, 0), "image": RealItem("image", 15, 0, 0)}
    problems, verified, unknown = media_findings(data, {1: Seen({0: [*TEXT, PIXELS, FEATURES]}, AUDIO_GRADS, {})},
                                                 [], real, {}, "its 5 steps on 2 ranks train records 1-10")
    assert problems == [] and len(verified) == 1 and verified[0].startswith("audio")
    assert unknown == ["image: no real image is trained in the smoke (its 5 steps on 2 ranks train records 1-10; the "
                       "first record with one: record 16), only masked stand-ins: put a record with one among the "
                       "first records to prove it"]


def test_the_sampler_deals_records_in_file_order_across_ranks() -> None:
    """MindSpeed-MM's BaseRandomBatchSampler, micro-batch 1, no shuffle: record i on rank i % R at step i // R + 1;
    the tail that does not fill every rank is dropped; with data_sharding each rank reads its own bucket."""
    assert [trained_at(i, 11, 2) for i in range(11)] == [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0),
                                                         (4, 1), (5, 0), (5, 1), None]
    assert [trained_at(i, 6, 2, sharding=True) for i in range(6)] == [(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (3, 1)]
    assert trained_at(0, 1, 2) is None  # fewer records than ranks
    records = [{"audios": ["a.wav"]}] * 3 + [{"images": ["x.png"]}] + [{"audios": ["b.wav"]}] * 12 + [{}]
    found = real_items(records, record_files({}), 2, 5)
    assert found == {"image": RealItem("image", 3, 2, 1), "audio": RealItem("audio", 0, 1, 0)}
    late = real_items([{"audios": ["a.wav"]}] * 12 + [{"images": ["x.png"]}], record_files({}), 2, 5)
    assert late["image"] == RealItem("image", 12, 0, 0)


def test_a_medium_is_proven_only_at_a_step_where_no_other_medium_of_its_tower_is_trained() -> None:
    """Image and video share the vision tower: at a step that trains both, the tower's gradient is theirs together.
    The image is proven at the first step whose other records hold no video; where there is none, not verified."""
    video, image, text = {"videos": ["v.mp4"]}, {"images": ["x.png"]}, {}
    found = real_items([video, video, image, text, video, video], record_files({}), 2, 5)
    assert found["image"] == RealItem("image", 2, 2, 0) and found["video"] == RealItem("video", 0, 1, 0)
    shared = real_items([video, video, video, image, video, text, video, video], record_files({}), 2, 5)
    assert shared["image"] == RealItem("image", 3, 2, 1, "video")
    data = {**_data("video", 6, total=8), **_data("image", 1, total=8)}
    seen = {1: Seen({0: [*TEXT, VIDEO], 1: [*TEXT, VIDEO]}, VL_GRADS, {})}
    problems, verified, unknown = media_findings(data, seen, [], {**shared, "video": RealItem("video", 0, 1, 0)}, {})
    assert problems == [] and [line.split(" reached")[0] for line in verified] == ["video"]
    assert unknown == ["image: not verified on its own: every step that trains a real image (first a real image: "
                       "record 4's, on rank 1 at step 2) also trains a real video through the same tower, whose "
                       "gradient the tower's sums with the image's: move a record holding one to a step whose other "
                       "records hold no video (the sampler deals records to ranks in file order)"]


def test_wrapper_names_are_the_models_own() -> None:
    grads = {"model.visual.blocks.0._checkpoint_wrapped_module.attn.qkv.weight": 3e-3}
    assert tower("vision", grads, {}).roots == ["model.visual"]
    assert tower("vision", {"model.image_newline": 1.0}, {}).roots == []  # a parameter, not a tower module


def test_connectors_are_the_projectors_beside_the_towers_and_carry_their_towers_kind() -> None:
    assert connector("vision", GEMMA_GRADS, {}).roots == ["model.multi_modal_projector"]
    assert connector("audio", GEMMA_GRADS, {}).roots == []  # no audio tower: LLaVA's projector is the image's
    assert connector("audio", AUDIO_GRADS, {}).roots == ["multi_modal_projector"]  # Qwen2-Audio's is the audio's
    assert connector("vision", VL_GRADS, {}).roots == []  # Qwen2.5-VL's merger is inside model.visual


# --- the run's files --------------------------------------------------------------------------------------


def _run(tmp_path: Path, records: list[dict], observed: dict[int, dict]) -> tuple[Path, Path]:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(records))
    folder = tmp_path / "observe"
    folder.mkdir()
    for rank, record in observed.items():
        (folder / f"observe_rank{rank}.json").write_text(json.dumps(record))
    return folder, data


IMAGE_RECORDS = [{"messages": [{"role": "user", "content": "<image>What?"}, {"role": "assistant", "content": "A."}],
                  "images": [f"img_{i}.png"]} for i in range(4)]
CFG = {"data": {"dataset_param": {"attr": {"images": "images"}, "basic_parameters": {"max_samples": 4}}},
       "model": {"freeze": []}, "training": {"train_iters": 5}}


def test_the_run_files_are_read_for_every_rank(tmp_path: Path) -> None:
    from dataclasses import asdict

    batch = [asdict(item) for item in [*TEXT, GRID, PIXELS]]
    observed, data = _run(tmp_path, IMAGE_RECORDS, {
        0: {"step1_batch": batch, "step1_grads": VL_GRADS, "step1_no_grad": {}},
        1: {"step1_batch": [asdict(item) for item in [*TEXT, GRID]]}})
    problems, verified, unknown = prove_media(observed, CFG, data)
    assert problems == [] and unknown == []
    assert verified == ["image reached forward (pixel_values [16, 1176] on rank 0; a real one: record 1) and "
                        "model.visual got a gradient (norm 5.0e-03) at step 1"]


def test_the_run_files_of_the_step_that_trains_the_real_item_are_read(tmp_path: Path) -> None:
    """Mixed data (audio, audio, audio, image, ...): the observer recorded step 1 and step 2 (the spec's
    ``media_steps``, which the smoke derives from the same data); the image is proven at step 2 on rank 1, with
    Gemma 3's zero projection noted from the recorded ``connector_zero``."""
    from dataclasses import asdict

    from hooks.smoke.media_proof import media_steps

    audio = {"messages": [{"role": "user", "content": "<audio>Tone?"}, {"role": "assistant", "content": "Low."}],
             "audios": ["a.wav"]}
    records = [audio, audio, audio, {**IMAGE_RECORDS[0], "images": ["x.png"]}, audio, audio]
    cfg = {**CFG, "data": {"dataset_param": {"attr": {"images": "images", "audios": "audios"},
                                             "basic_parameters": {}}}}
    text = [asdict(item) for item in [*TEXT, PIXELS, FEATURES]]
    grads = {**{k: v for k, v in AUDIO_GRADS.items() if "projector" not in k}, **GEMMA_GRADS}
    observed, data = _run(tmp_path, records, {
        0: {"step1_batch": text, "step1_grads": grads, "step1_no_grad": {}, "step2_batch": text,
            "step2_grads": {**grads, "audio_tower.conv1.weight": 0.0}, "step2_no_grad": {},
            "connector_zero": {"model.multi_modal_projector.mm_input_projection_weight": True}},
        1: {"step1_batch": text, "step2_batch": text}})
    assert media_steps(cfg, data, 2) == [1, 2]
    problems, verified, unknown = prove_media(observed, cfg, data, 2)
    assert problems == [] and unknown == []
    assert verified[0].startswith("image reached forward (pixel_values [16, 1176] on rank 1, 2 ranks in all; a real "
                                  "one: record 4) and model.multi_modal_projector got a gradient (norm 3.0e-02) at "
                                  "step 2, model.vision_tower none: note: ")
    assert verified[1].startswith("audio reached forward (input_features [2, 128, 400] on rank 0, 2 ranks in all; a "
                                  "real one: record 1) and audio_tower got a gradient")


@pytest.mark.parametrize(("record", "cause"), [
    ({"step1_grads": VL_GRADS}, "the observer recorded no step-1 batch"),
    ({"step1_batch": {"error": "OSError: disk full"}, "step1_grads": VL_GRADS}, "rank 0: OSError: disk full"),
    ({"step1_batch": [], "step1_grads": {"error": "RuntimeError: gather"}}, "step-1 gradients (RuntimeError: gather)"),
])
def test_missing_observations_are_not_evaluated_never_passed(tmp_path: Path, record: dict, cause: str) -> None:
    observed, data = _run(tmp_path, IMAGE_RECORDS, {0: record})
    problems, verified, unknown = prove_media(observed, CFG, data)
    assert problems == [] and verified == []
    assert unknown and unknown[0].startswith("image: could not evaluate") and cause in unknown[0]


def test_text_only_data_has_nothing_to_prove(tmp_path: Path) -> None:
    records = [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}]
    observed, data = _run(tmp_path, records, {})
    assert prove_media(observed, CFG, data) == ([], [], [])


def test_the_observer_records_whether_each_connectors_weight_matrices_are_zero() -> None:
    """The observer's ``connector_zero`` on a plain module (unsharded): Gemma 3's projection as from_config leaves it
    is zeros; a tower's and the language model's matrices are not connectors; a 1-D norm weight is no matrix."""
    import importlib

    observer = importlib.import_module("hooks.smoke.observer.sitecustomize")

    class Projector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mm_input_projection_weight = torch.nn.Parameter(torch.zeros(4, 3))
            self.mm_soft_emb_norm = torch.nn.LayerNorm(4)

    model = torch.nn.Module()
    model.vision_tower = torch.nn.Linear(3, 4)
    model.multi_modal_projector = Projector()
    model.language_model = torch.nn.Linear(3, 3)
    assert observer.connector_zero(model) == {"multi_modal_projector.mm_input_projection_weight": True}
    with torch.no_grad():
        model.multi_modal_projector.mm_input_projection_weight[0, 0] = 0.1
    assert observer.connector_zero(model) == {"multi_modal_projector.mm_input_projection_weight": False}
