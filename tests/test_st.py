"""The system test's baseline in MindSpeed-MM's terms (issue 35): the log lines its parser reads, the baseline's
shape per device, and the loss comparison ``hooks.update`` and the smoke make (tier 1; the real trainer and the
framework's own comparator run in tier 2: test_framework.py, test_branch_c_framework.py, test_update_framework.py).
"""

from __future__ import annotations

import math

from hooks.scaffold import StPaths
from hooks.smoke.baseline import LOSS_REL_TOL, baseline_json, compare_losses, parse_log

# Two of the trainer's lines as MindSpeed-MM 57069cd5 logs them (train_engine.training_log, utils.report_memory).
LOG = """\
[Rank 0 | Local Rank 0] 2026-12-06 23:36:05,505 INFO [mindspeed_mm.fsdp.train.train_engine:48] =>  [2026-12-06 \
23:36:05] iteration        1/       5 | consumed samples:            2 | elapsed time per iteration (ms): 2165.1 | \
learning rate: 1.000000E-04 | global batch size:     2 | loss: 8.117440E+00 | grad norm: 3.738 |
[Rank 0] (after 2 iterations) memory (MB) | allocated: 512.5 | max allocated: 900.25 | reserved: 0.0 | max reserved: 0.0
[Rank 0 | Local Rank 0] 2026-12-06 23:36:05,661 INFO [mindspeed_mm.fsdp.train.train_engine:48] =>  [2026-12-06 \
23:36:05] iteration        2/       5 | consumed samples:            4 | elapsed time per iteration (ms): 154.3 | \
learning rate: 1.000000E-04 | global batch size:     2 | loss: 8.104323E+00 | grad norm: 3.538 |
"""


def test_the_log_is_read_as_acquire_json_reads_it() -> None:
    measured = parse_log(LOG)
    assert measured.loss == [8.11744, 8.104323] and measured.time == [2165.1, 154.3]
    assert measured.memory == [{"rank": 0, "allocated memory": 512.5, "max allocated memory": 900.25}]


def test_a_cpu_baseline_holds_losses_only_and_a_device_one_everything() -> None:
    measured = parse_log(LOG)
    assert baseline_json(measured, "cpu") == {"loss": [8.11744, 8.104323], "time": [], "memo info": [], "warm_up": 2}
    gpu = baseline_json(measured, "cuda")
    assert gpu["time"] == [2165.1, 154.3] and gpu["memo info"][0]["max allocated memory"] == 900.25
    assert list(gpu) == ["loss", "time", "memo info", "warm_up"]  # upstream's keys, in upstream's order


def test_the_comparison_is_the_comparators_and_names_the_first_step_that_moved() -> None:
    same = compare_losses([8.0, 7.9, 7.8], [8.0, 7.9, 7.8])
    assert same.within and same.max_rel == 0 and same.line().startswith("ok (max rel diff 0.00% over 3 steps")
    inside = compare_losses([8.0, 7.9], [8.0 * (1 + LOSS_REL_TOL * 0.99), 7.9])
    assert inside.within
    moved = compare_losses([8.0, 7.9, 7.8], [8.0, 8.1, 9.0])
    assert not moved.within and moved.first_step == 2 and math.isclose(moved.max_rel, 1.2 / 7.8)
    assert moved.line().startswith("REGRESSION at step 2: loss 7.9 -> 8.1 (+2.53%")
    short = compare_losses([8.0, 7.9], [8.0])
    assert not short.within and short.line() == "not comparable: 1 steps logged, the baseline has 2"


def test_the_files_have_upstreams_names() -> None:
    paths = StPaths("my_vl")
    assert [str(p) for p in paths.triple()] == ["tests/st/shell_scripts/finetune_my_vl.sh",
                                                "tests/st/run_configs/finetune_my_vl/my_vl_config.yaml",
                                                "tests/st/baseline_results/finetune_my_vl.json"]


def test_a_model_that_needs_transformers_5_pins_it_in_its_system_test() -> None:
    """Upstream's Qwen3.5 case installs transformers 5.2.0 for itself and restores the original after: so does the
    script of a model whose facts say it needs transformers 5; any other model's script touches no package."""
    import subprocess

    from hooks.render.files import render_template_file

    pinned = render_template_file("partials/st_finetune.sh.jinja",
                                  {"model_id": "q35", "model_facts": {"transformers_required": "5.2.0"}})
    assert "pip install transformers==5.2.0 -q" in pinned and "trap restore_transformers EXIT" in pinned
    plain = render_template_file("partials/st_finetune.sh.jinja", {"model_id": "q25", "model_facts": {}})
    assert "pip " not in plain
    for text in (pinned, plain):
        assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0
