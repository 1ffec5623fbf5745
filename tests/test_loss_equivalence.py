"""The trainer computes the model's own objective (issue 24): ``hooks.smoke.reference`` replays the first
steps' batches through the model folder's own class and a plain AdamW loop.

Tier 1: the reduction, schedule and comparison rules. Tier 2: bugs a migration really makes, injected
into a generated scaffold (the model plugin) or the checkout, each failing the smoke with a message that
names it; the clean scaffold passes with the equivalence verified (``tests/test_framework.py`` asserts
it for every family it trains). The same scaffold carries the media proof's (``hooks.smoke.media_proof``)
injected failures: a collator that loses ``pixel_values`` and a plugin that never feeds them to the tower.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hooks import env_with_hooks
from hooks.smoke.reference import Equivalence, compare, lr_at, rank_weights, reduction_of, training_defaults
from tests.copier_run import commit_all, copy, mm_checkout

REF = Equivalence(reduction="default", dtype="bf16", reference_losses=[8.0, 7.9, 7.8],
                  reference_grad_norms=[3.7, 3.6, 3.5], reference_lrs=[1e-4, 1e-4, 1e-4])


def test_the_framework_reductions() -> None:
    assert rank_weights("default", [10, 30]) == [0.5, 0.5]  # each rank's token mean, averaged
    assert rank_weights("per_token_loss", [10, 30]) == [0.25, 0.75]  # the global token mean
    assert "not the global token mean" in reduction_of("default", 2)
    assert "global token mean" in reduction_of("per_token_loss", 2)


def test_the_schedule() -> None:
    constant = {"lr": 1e-4, "train_iters": 5, "lr_warmup_ratio": 0.0, "lr_decay_style": "constant"}
    assert [lr_at(s, constant) for s in (1, 3)] == [1e-4, 1e-4]
    warm = {**constant, "lr_warmup_ratio": 0.4, "lr_start": 0.0}
    assert lr_at(1, warm) == 0.0 and lr_at(2, warm) == pytest.approx(5e-5) and lr_at(3, warm) == 1e-4
    assert lr_at(4, {**constant, "lr_decay_style": "cosine"}) is None  # not modelled: not compared


def test_equal_figures_verify() -> None:
    problems, verified, unknown = compare(REF, [8.0, 7.9, 7.8], [3.7, 3.6, 3.5], [1e-4] * 3)
    assert not problems and not unknown and "step-1 loss 8.000000 = the model's own 8.000000" in verified[0]


@pytest.mark.parametrize(("losses", "norms", "lrs", "facts"), [  # what differs, its figure, the reference's, which
    ([8.05, 7.9, 7.8], [3.7, 3.6, 3.5], [1e-4] * 3, ("step-1 loss 8.050000", "8.000000", "model's own objective")),
    ([8.0, 7.7, 7.8], [3.7, 3.6, 3.5], [1e-4] * 3, ("step-2 loss 7.700000", "7.900000", "AdamW")),
    ([8.0, 7.9, 7.8], [3.7, 3.6, 3.5], [1e-3] * 3, ("learning rate 1.000e-03", "1.000e-04", "training.lr")),
    ([8.0, 7.9, 7.8], [3.7, 3.9, 3.5], [1e-4] * 3, ("step-2 grad norm 3.900000", "3.600000", "AdamW")),
    ([8.0, 7.9, 7.8], [3.9, 3.6, 3.5], [1e-4] * 3, ("step-1 grad norm 3.900000", "3.700000", "model's own objective")),
])
def test_differences_are_named(losses: list[float], norms: list[float], lrs: list[float],
                               facts: tuple[str, ...]) -> None:
    problems, verified, _ = compare(REF, losses, norms, lrs)
    assert not verified and any(all(fact in p for fact in facts) for p in problems), problems


def test_figures_read_from_the_log_allow_its_rounding() -> None:
    """The log prints grad norms with 3 decimals; the observer's unrounded record is compared exactly."""
    assert not compare(REF, [8.0, 7.9, 7.8], [3.7004, 3.6, 3.5], [1e-4] * 3, exact=False)[0]


def test_an_error_is_not_evidence() -> None:
    problems, verified, unknown = compare(Equivalence(error="the reference failed (KeyError: x)"), [8.0], [3.7],
                                          [1e-4])
    assert not problems and not verified and unknown[0].startswith("loss equivalence: could not evaluate")


def test_optimizer_defaults_are_read_from_the_checkout(tmp_path: Path) -> None:
    args = tmp_path / "mindspeed_mm/fsdp/params/training_args.py"
    args.parent.mkdir(parents=True)
    args.write_text("class A:\n    adam_beta2: float = field(default=0.95)\n"
                    "    no_decay_params: List[str] = field(default_factory=list)\n    clip_grad: float = 1.0\n")
    assert training_defaults(tmp_path) == {"adam_beta2": 0.95, "no_decay_params": [], "clip_grad": 1.0}


# --- tier 2: injected bugs -------------------------------------------------------------------------------

MODEL_ID = "qwen2_5_vl_le"
PLUGIN = f"mindspeed_mm/fsdp/models/{MODEL_ID}/modeling_{MODEL_ID}.py"

# Appended to the generated plugin class: what a hand-written migration gets wrong.
CI_BUGS = ("labels shifted by one extra token", "the loss summed per sample instead of averaged per token")
FORWARD_BUGS = {
    "labels shifted by one extra token": """
    def forward(self, *args, labels=None, **kwargs):
        import torch
        if labels is not None:
            labels = torch.nn.functional.pad(labels[:, 1:], (0, 1), value=-100)
        return super().forward(*args, labels=labels, **kwargs)
""",
    "the loss summed per sample instead of averaged per token": """
    def forward(self, *args, labels=None, **kwargs):
        out = super().forward(*args, labels=labels, **kwargs)
        out.loss = out.loss * (labels[..., 1:] != -100).sum()
        return out
""",
    "mRoPE position_ids replaced by text positions (rope_deltas dropped)": """
    def forward(self, *args, position_ids=None, rope_deltas=None, **kwargs):
        import torch
        length = kwargs["input_ids"].shape[-1]
        position_ids = torch.arange(length).view(1, 1, -1).expand(3, kwargs["input_ids"].shape[0], -1)
        return super().forward(*args, position_ids=position_ids, **kwargs)
""",
    "attention without the causal mask": """
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for module in self.model.language_model.modules():
            if hasattr(module, "is_causal"):
                module.is_causal = False
""",
}


@pytest.fixture(scope="module")
def scaffold(mm_home: Path, tmp_path_factory: pytest.TempPathFactory, tiny_models, template_src: Path) -> Path:
    """A checkout with the tiny Qwen2.5-VL rendered (no smoke yet) and committed, so each test can revert."""
    checkout = mm_checkout(mm_home, tmp_path_factory.mktemp("mm-loss"))
    done = copy(checkout, template=template_src, model_id=MODEL_ID, model_path=tiny_models("qwen2_5_vl"))
    assert done.returncode == 0, done.stderr[-3000:]
    commit_all(checkout)
    return checkout


def _smoke(checkout: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hooks.smoke", f".copier-answers/{MODEL_ID}.yml", "--no-report"],
                          cwd=checkout, env=env_with_hooks(), capture_output=True, text=True, timeout=900, check=False)


def _revert(checkout: Path) -> None:
    subprocess.run(["git", "-C", str(checkout), "checkout", "-q", "--", "."], check=True)


@pytest.mark.tier2
@pytest.mark.parametrize("bug", [bug if bug in CI_BUGS else pytest.param(bug, marks=pytest.mark.full_matrix)
                                 for bug in sorted(FORWARD_BUGS)])
def test_a_plugin_bug_fails_the_smoke_naming_the_objective(bug: str, scaffold: Path) -> None:
    plugin = scaffold / PLUGIN
    plugin.write_text(plugin.read_text() + FORWARD_BUGS[bug])
    try:
        done = _smoke(scaffold)
    finally:
        _revert(scaffold)
    assert done.returncode != 0, done.stdout[-3000:]
    assert "is not the model's own objective" in done.stdout, done.stdout[-3000:]  # step-1 loss or gradient


@pytest.mark.tier2
def test_a_learning_rate_not_the_yamls_fails_the_smoke(scaffold: Path) -> None:
    """The trainer builds its optimizer with 10x the YAML's ``training.lr`` (a framework edit, as a bug
    in the trainer or a plugin trainer would)."""
    trainer = scaffold / "mindspeed_mm/fsdp/train/trainer.py"
    text = trainer.read_text()
    assert "lr=args.training.lr,\n            betas=" in text
    trainer.write_text(text.replace("lr=args.training.lr,\n            betas=", "lr=args.training.lr * 10,\n"
                                    "            betas=", 1))
    try:
        done = _smoke(scaffold)
    finally:
        _revert(scaffold)
    assert done.returncode != 0, done.stdout[-3000:]
    assert "learning rate 1.000e-03 is not the YAML's 1.000e-04" in done.stdout, done.stdout[-3000:]


@pytest.mark.tier2
def test_the_clean_scaffold_verifies_the_objective(scaffold: Path) -> None:
    done = _smoke(scaffold)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-3000:]
    assert "verified: loss equivalence: step-1 loss" in done.stdout and "relative error" in done.stdout
    # the generated sample's 8 images reached forward and the vision tower trained (hooks.smoke.media_proof)
    line = (r"verified: image reached forward \(pixel_values \[\d+, \d+\] on rank 0, 2 ranks in all; a real one: "
            r"record 1\) and "
            r"model\.visual got a gradient \(norm \d\.\de-\d\d\) at step 1")
    assert re.search(line, done.stdout), done.stdout[-3000:]


COLLATOR = "mindspeed_mm/fsdp/data/dataloader/data_collator.py"


@pytest.mark.tier2
def test_a_collator_that_loses_the_pixels_fails_the_smoke_naming_the_image(scaffold: Path) -> None:
    """The framework's collator (``qwen3vl``) drops ``pixel_values`` and keeps ``image_grid_thw``: the model
    trains on the image placeholder's tokens, the loss is finite and changing, the reference (fed the same
    batches) agrees. Only the media proof can tell."""
    collator = scaffold / COLLATOR
    text = collator.read_text()
    call = "    def __call__(self, *args, **kwargs):\n        return self.data_collator(*args, **kwargs)\n"
    assert text.index("class DataCollatorForQwen2vl") < text.index(call)  # its first __call__ is qwen3vl's
    collator.write_text(text.replace(call, "    def __call__(self, *args, **kwargs):\n        batch = "
                                     "self.data_collator(*args, **kwargs)\n        batch.pop('pixel_values', None)\n"
                                     "        return batch\n", 1))
    try:
        done = _smoke(scaffold)
    finally:
        _revert(scaffold)
    print(done.stdout[-3000:])
    assert done.returncode != 0, done.stdout[-3000:]
    line = (r"image: the data names 8 image files but no image input reached forward at step 1 on rank 0, which "
            r"trains record 1's \(batch keys: \[[a-z_, ]*"
            r"image_grid_thw[a-z_, ]*\]; image_grid_thw holds no image content\): the model trained on the "
            r"placeholder's text")
    assert re.search(line, done.stdout) and "pixel_values" not in done.stdout.split("batch keys: ")[1].split("]")[0], \
        done.stdout[-3000:]
    assert "hint: each medium's inputs must reach forward and its tower" in done.stdout


def test_dropout_is_off_in_both_the_smoke_and_the_reference() -> None:
    """Random drops differ between processes: both sides run without dropout, the config unchanged."""
    import torch

    from hooks.smoke.reference import dropout_off

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = torch.nn.Dropout(0.1)
            self.attention_dropout = 0.2  # read by transformers' attention in training mode
            self.layerdrop = 0.05
            self.scale = 0.5  # not a dropout

    model = torch.nn.Sequential(Block(), torch.nn.Dropout(0.0))
    assert sorted(dropout_off(model)) == ["0.attention_dropout=0.2", "0.drop=0.1", "0.layerdrop=0.05"]
    assert model[0].drop.p == 0.0 and model[0].attention_dropout == 0.0 and model[0].scale == 0.5
    assert dropout_off(model) == []


@pytest.mark.tier2
def test_a_plugin_that_never_feeds_the_pixels_to_the_tower_fails_naming_it(scaffold: Path) -> None:
    """The batch holds ``pixel_values`` but the plugin's forward drops them: they reached ``forward``, the
    vision tower got no gradient."""
    plugin = scaffold / PLUGIN
    plugin.write_text(plugin.read_text() + """
    def forward(self, *args, pixel_values=None, **kwargs):
        return super().forward(*args, **kwargs)
""")
    try:
        done = _smoke(scaffold)
    finally:
        _revert(scaffold)
    print(done.stdout[-3000:])
    assert done.returncode != 0, done.stdout[-3000:]
    assert re.search(r"image: pixel_values reached forward \([^)]*\) but model.visual got none at step 1: the "
                     r"image's features did not reach the loss", done.stdout), done.stdout[-3000:]
    assert "hint: the medium reached forward but its features did not reach the loss" in done.stdout
