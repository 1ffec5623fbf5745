"""The memory plan's activation arithmetic against the bytes autograd really saves (issue 23), layer by layer.

Each CI family's tiny model runs one bf16 forward in process on an image/chat sample; saved-tensor hooks
attribute every stored tensor (each storage once) to the decoder layer or vision block that saved it
(``hooks.model.saved``), and the plan's ``layer_row_bytes`` / ``recomputed_row_bytes`` for the rows that layer
saw must be within 15 % of it, with recompute on (non-reentrant checkpointing: only the layer inputs) and off.
"""

from __future__ import annotations

import pytest

from hooks.smoke.memory_check import measure_in_process
from tests.test_framework import CI_SUBSET

TOLERANCE = 0.15
FAMILIES = sorted(CI_SUBSET | {"qwen2_5_vl", "qwen3_vl_moe", "glm4v", "gemma3"})


@pytest.mark.parametrize("recompute", [False, True], ids=["full", "recompute"])
@pytest.mark.parametrize("arch", FAMILIES)
def test_activation_estimate_matches_saved_tensor_bytes_per_layer(arch: str, recompute: bool, tiny_models) -> None:
    out = measure_in_process(tiny_models(arch), recompute=recompute)
    measured, predicted = out["measured"], out["predicted"]
    assert predicted and set(predicted) == set(measured.layers), (predicted, measured.layers)
    off = {name: (predicted[name], got) for name, got in measured.layers.items()
           if abs(predicted[name] - got) > TOLERANCE * got}
    assert not off, f"{arch}: layer -> (predicted, saved bytes) beyond {TOLERANCE:.0%}: {off}"
    assert all(measured.rows[name] > 0 for name in measured.layers)


def test_smoke_memory_table_sets_measured_beside_predicted(tiny_models, tmp_path) -> None:
    """What a smoke reports from the observer's record (here written from an in-process measurement): the plan's
    activations beside the saved bytes per layer kind, and the peak (n/a on CPU), as REPORT.md's table."""
    import json

    from hooks.smoke.memory_check import memory_notes, memory_rows, memory_table

    model_dir = tiny_models("qwen2_5_vl")
    saved = measure_in_process(model_dir, recompute=True)["measured"]
    (tmp_path / "observe_rank0.json").write_text(json.dumps({"activations": {**saved.to_dict(), "recompute": True},
                                                              "memory": {"device": "cpu", "peak_allocated": None}}))
    cfg = {"model": {"freeze": []}, "parallel": {"fsdp_plan": {"param_dtype": "bf16"}}}  # as measured in process
    rows = memory_rows(tmp_path, cfg, model_dir, 2)
    kinds = [r for r in rows if r["what"].startswith("activations")]
    assert len(kinds) == 2 and all(abs(r["predicted"] - r["measured"]) <= TOLERANCE * r["measured"] for r in kinds)
    peak = rows[-1]
    assert peak["measured"] is None and peak["predicted"] > 0 and "n/a on CPU" in peak["note"]
    table = memory_table(rows)
    assert table.startswith("| rank | quantity | predicted (memory plan) | measured |") and "| n/a |" in table
    assert len(memory_notes(rows)) == len(rows)


def test_a_layer_off_the_estimate_is_named_with_what_the_estimate_counted(tiny_models, tmp_path) -> None:
    """Issue 35: a layer kind beyond 15 % gets a note naming its worst layer, its figures and what the plan counted
    for it (a WARNING, shown in REPORT.md), instead of a bare percentage."""
    import json

    from hooks.smoke.memory_check import memory_notes, memory_rows

    model_dir = tiny_models("qwen2_5_vl")
    saved = measure_in_process(model_dir, recompute=True)["measured"].to_dict()
    layer = next(name for name in saved["layers"] if ".language_model.layers." in name)
    saved["layers"][layer] += 2 * saved["layers"][layer]  # as if it saved twice its input more
    (tmp_path / "observe_rank1.json").write_text(json.dumps({"activations": {**saved, "recompute": True}}))
    cfg = {"model": {"freeze": []}, "parallel": {"fsdp_plan": {"param_dtype": "bf16"}}}
    notes = memory_notes(memory_rows(tmp_path, cfg, model_dir, 2))
    text = next(note for note in notes if "decoder layers" in note)
    assert text.startswith("WARNING: memory, rank 1: activations saved for backward") and "worst layer 66.7%: " in text
    assert f"{layer}, " in text and "the estimate counts only its input (rows x hidden x dtype)" in text
    assert "saved (storages: (1, " in text and " bfloat16 " in text  # what the layer kept, storage by storage
    assert not any(note.startswith("WARNING") for note in notes if "vision blocks" in note)
