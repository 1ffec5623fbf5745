"""Multi-stage checkpoints found by the probe itself (issue 33, deliverable 4).

The tiny ``qwen2_5_omni`` and ``qwen3_omni_moe`` (hooks/tiny/omni.py) are the FULL published classes: a thinker
(audio + vision towers, the language model), a talker and a vocoder. With no checkout plugin to read and no user
answer, the probe must train the thinker, say why, and every consumer (the cluster mode's memory plan, the smoke's
weight check, the loss reference) must use the thinker too. Towers are typed by the medium they encode.
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from hooks.model.facts import ModelFacts
from hooks.model.facts_text import findings_text, render_table, towers_text
from hooks.model.loading import ProbeError
from hooks.model.plan import ModuleInfo, ModuleTable, derive_plan
from hooks.probe import probe

OMNI = {"qwen2_5_omni": ("Qwen2_5OmniForConditionalGeneration", "token2wav"),
        "qwen3_omni_moe": ("Qwen3OmniMoeForConditionalGeneration", "code2wav")}


@pytest.fixture(scope="module")
def omni_facts(tiny_models) -> dict[str, ModelFacts]:
    """Each tiny omni folder probed as a plain copy would: no checkout, no user answer."""
    return {arch: probe(tiny_models(arch), with_processor=False) for arch in OMNI}


def _thinker_step(model_dir: Path, published: str) -> tuple[float, dict[str, float], Any]:
    """The published class loaded from the folder; its thinker's forward with labels on the processor's outputs for
    one audio clip and one image; the loss and each tower's gradient (sum of absolute values)."""
    import torch
    import transformers
    from PIL import Image

    from hooks.data.sample import demo_audio

    model = getattr(transformers, published).from_pretrained(model_dir, dtype=torch.float32)
    processor = transformers.AutoProcessor.from_pretrained(model_dir)
    wave, answer = demo_audio(0)
    image = Image.new("RGB", (64, 64), (200, 30, 30))
    prompt = (f"<|im_start|>user\n{processor.audio_bos_token}{processor.audio_token}{processor.audio_eos_token}"
              f"{processor.vision_bos_token}{processor.image_token}{processor.vision_eos_token}What is this?"
              "<|im_end|>\n<|im_start|>assistant\n")
    if processor.chat_template:  # the model's own template where the release has one
        messages = [{"role": "user", "content": [{"type": "audio", "audio": "clip.wav"}, {"type": "image"},
                                                 {"type": "text", "text": "What is this?"}]}]
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    batch = processor(text=[f"{prompt}{answer}<|im_end|>\n"], audio=[wave], images=[image], return_tensors="pt")
    prompt_len = processor(text=[prompt], audio=[wave], images=[image], return_tensors="pt")["input_ids"].shape[1]
    labels = batch["input_ids"].clone()
    labels[:, :prompt_len] = -100
    thinker = model.thinker.train()
    loss = thinker(**batch, labels=labels).loss
    loss.backward()
    grads = {tower: sum(float(p.grad.abs().sum()) for p in getattr(thinker, tower).parameters() if p.grad is not None)
             for tower in ("audio_tower", "visual")}
    return float(loss.detach()), grads, model


@pytest.mark.parametrize("arch", sorted(OMNI))
def test_tiny_omni_bundle_is_sound(arch: str, tiny_models) -> None:
    """The whole bundle is there (talker and vocoder built, as enable_audio_output publishes it), and the thinker
    trains on audio and an image in plain transformers: a finite loss, gradients in both towers."""
    published, vocoder = OMNI[arch]
    loss, grads, model = _thinker_step(tiny_models(arch), published)
    assert {"thinker", "talker", vocoder} <= {name for name, _ in model.named_children()}
    assert math.isfinite(loss) and loss > 0
    assert grads["audio_tower"] > 0 and grads["visual"] > 0, grads


@pytest.mark.parametrize("arch", sorted(OMNI))
def test_probe_without_checkout_trains_the_thinker_and_says_why(arch: str, omni_facts) -> None:
    facts = omni_facts[arch]
    published, vocoder = OMNI[arch]
    stage = facts.trained_submodule
    assert stage.name == "thinker" and stage.config_key == "thinker_config"
    assert stage.published_class == published and facts.architecture == stage.class_name
    reason = stage.reason
    assert f"{published} has no forward of its own" in reason
    assert "no input embeddings" in reason  # the published class names none
    assert "audio and vision encoder towers (audio_tower, visual)" in reason and "returns a loss" in reason
    assert f"talker, {vocoder} not trained" in reason
    assert facts.returns_loss and facts.model_type == arch
    plan = facts.plan
    assert plan.problems == []
    every = plan.apply_modules + plan.recompute_modules + plan.ep_modules + plan.freeze_proposal
    assert not [p for p in every if p.split(".")[0] in {"thinker", "talker", "token2wav", "code2wav"}], every
    assert {"audio_tower", "visual", "model.layers.{*}", "lm_head"} <= set(plan.apply_modules)


@pytest.mark.parametrize("arch", sorted(OMNI))
def test_towers_are_typed_by_medium(arch: str, omni_facts) -> None:
    facts = omni_facts[arch]
    plan = facts.plan
    assert plan.towers == {"audio_tower": "audio", "visual": "vision"}
    assert plan.vision_towers == ["visual"]  # the audio tower is no vision tower
    assert sorted(plan.freeze_proposal) == ["audio_tower", "visual"]
    text = render_table(facts)
    assert "audio_tower (audio), visual (vision), model (language)" in text
    assert "trains           thinker of" in text
    findings = findings_text(facts, "/models/omni", width=400)
    assert "towers       audio_tower (audio), visual (vision)" in findings
    assert "input_features" in findings  # audio inputs are media inputs too


def test_a_talker_or_vocoder_is_no_vision_tower() -> None:
    """Were a bundle planned whole (its published class trainable as it is), its talker and vocoder are towers that
    encode no medium: never called vision towers, never proposed for freezing."""
    def block_stack(name: str, cls: str, params: int) -> list[ModuleInfo]:
        return [ModuleInfo(name, "Tower", 2 * params, 0), ModuleInfo(f"{name}.layers", "ModuleList", 2 * params, 0,
                                                                    is_list=True),
                *(ModuleInfo(f"{name}.layers.{i}", cls, params, params) for i in range(2))]

    modules = [ModuleInfo("", "Bundle", 0, 0), *block_stack("visual", "VisionBlock", 10),
               *block_stack("audio_tower", "AudioLayer", 10), *block_stack("talker", "TalkerLayer", 10),
               *block_stack("code2wav", "Code2WavLayer", 10), ModuleInfo("language", "LM", 40, 0),
               ModuleInfo("language.embed_tokens", "Embedding", 20, 20),
               ModuleInfo("language.layers", "ModuleList", 20, 0, is_list=True),
               *(ModuleInfo(f"language.layers.{i}", "DecoderLayer", 10, 10) for i in range(2))]
    plan = derive_plan(ModuleTable(modules, input_embeddings="language.embed_tokens"))
    assert plan.language_tower == "language"
    assert plan.towers == {"visual": "vision", "audio_tower": "audio", "talker": "", "code2wav": ""}
    assert plan.vision_towers == ["visual"]
    assert plan.freeze_proposal == ["visual", "audio_tower"]
    assert plan.encoder_towers == {"visual": "vision", "audio_tower": "audio"}
    assert "talker (no medium: not an encoder)" in towers_text(plan)


def test_old_facts_without_the_new_fields_still_load(omni_facts) -> None:
    """An answers file frozen before: no ``towers`` in its plan, no ``trained_submodule``; it loads and prints."""
    old = json.loads(omni_facts["qwen3_omni_moe"].to_json(with_timings=False))
    old.pop("trained_submodule")
    old["plan"].pop("towers")
    old["plan"]["vision_towers"] = ["audio_tower", "visual"]  # what plans said before media were typed
    facts = ModelFacts.from_dict(old)
    assert facts.trained_submodule is None
    assert "audio_tower (vision), visual (vision)" in render_table(facts)  # as recorded, not re-derived
    assert "trains" not in findings_text(facts, "/models/omni")


def test_the_cluster_mode_plans_the_thinker(tiny_models, capsys) -> None:
    """``hooks.model.cluster`` (copier's memory-plan question): the thinker by the same rule without any answer, and
    the frozen facts' name where the copy hands it over."""
    from hooks.model.cluster import main, model_shapes

    folder = tiny_models("qwen3_omni_moe")
    shapes = model_shapes(folder)
    assert shapes.shapes and not [p.name for p in shapes.shapes if p.name.startswith(("thinker.", "talker."))]
    assert shapes.towers == ["audio_tower", "visual"] and shapes.ep_modules == ["model.layers.{*}.mlp.experts"]
    named = model_shapes(folder, trained_submodule="thinker")
    assert [p.name for p in named.shapes] == [p.name for p in shapes.shapes]
    assert main([str(folder), "--json", "--trained-submodule", "thinker", "--devices-per-node", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["fits"]


def test_the_weight_check_reads_the_stage_tensors(tiny_models, monkeypatch) -> None:
    """The observer's check (hooks/smoke/observer) on the trained thinker: the folder's tensors are ``thinker.*``."""
    import torch

    from hooks.model.stages import load_trained

    monkeypatch.setenv("MSMM_OBSERVE_NO_CHAIN", "1")
    monkeypatch.delenv("MSMM_OBSERVE", raising=False)
    observer = importlib.import_module("hooks.smoke.observer.sitecustomize")
    folder = tiny_models("qwen3_omni_moe")
    facts = probe(folder, with_processor=False)
    thinker = load_trained(folder, facts.trained_submodule, dtype=torch.float32)
    assert type(thinker).__name__ == facts.architecture
    without = observer.check_weights(thinker, folder)
    assert without["checked"] == [] and "no parameter" in without["error"]  # the old behaviour: nothing to compare
    weights = observer.check_weights(thinker, folder, "thinker.")
    assert weights["error"] == "" and weights["mismatch"] == [] and len(weights["checked"]) == 4
    assert len(observer._file_tensors(folder, thinker, "thinker.")) == len(list(thinker.named_parameters()))


def test_the_loss_reference_builds_the_stage(tiny_models) -> None:
    """``hooks.smoke.reference.build_reference`` with the stage: the thinker's own class, from thinker_config, with
    the folder's ``thinker.*`` weights (the published class has no forward that returns a loss)."""
    import torch
    from safetensors import safe_open

    from hooks.smoke.reference import build_reference

    folder = tiny_models("qwen2_5_omni")
    stage = probe(folder, with_processor=False).trained_submodule
    master, work = build_reference(folder, {"model": {"freeze": ["audio_tower"]}}, {}, stage)
    assert type(master).__name__ == "Qwen2_5OmniThinkerForConditionalGeneration"
    params = dict(master.named_parameters())
    with safe_open(str(folder / "model.safetensors"), "pt") as handle:
        keys = [k for k in handle.keys() if k.startswith("thinker.")]
        assert len(keys) == len(params)
        for key in keys[:: max(1, len(keys) // 8)]:
            assert torch.equal(params[key[len("thinker."):]].detach(), handle.get_tensor(key).float())
    assert not any(p.requires_grad for p in master.audio_tower.parameters())
    assert all(p.requires_grad for p in master.visual.parameters())


def test_qwen3_omni_carries_its_releases_chat_template(tiny_models) -> None:
    """The tiny Qwen3-Omni holds the Instruct release's chat template (hooks/tiny/omni.py says where it was found):
    a clip is ``<|audio_start|><|audio_pad|><|audio_end|>``; an answer after turns given as content lists has no
    think block, the answer after a last user turn given as a plain string an empty one (its last-query index
    counts string turns only); ``enable_thinking=False`` closes the generation prompt with an empty one."""
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(tiny_models("qwen3_omni_moe"))
    listed = [{"role": "user", "content": [{"type": "audio", "audio": "clip.wav"}, {"type": "text", "text": "What?"}]},
              {"role": "assistant", "content": [{"type": "text", "text": "A tone."}]}]
    assert processor.apply_chat_template(listed, tokenize=False) == (
        "<|im_start|>user\n<|audio_start|><|audio_pad|><|audio_end|>What?<|im_end|>\n"
        "<|im_start|>assistant\nA tone.<|im_end|>\n")
    follow_up = [*listed, {"role": "user", "content": "And?"}, {"role": "assistant", "content": "Done."}]
    assert processor.apply_chat_template(follow_up, tokenize=False).endswith(
        "<|im_start|>user\nAnd?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nDone.<|im_end|>\n")
    assert processor.apply_chat_template(listed[:1], tokenize=False, add_generation_prompt=True,
                                         enable_thinking=False).endswith("assistant\n<think>\n\n</think>\n\n")
    assert processor.tokenizer.chat_template == processor.chat_template


def _thinker(folder: Path) -> Any:
    import torch

    from hooks.model.stages import load_trained

    facts = probe(folder, with_processor=False)
    return load_trained(folder, facts.trained_submodule, dtype=torch.float32), facts.plan.ep_modules


def test_experts_no_token_reaches_are_found_on_the_model(tiny_models) -> None:
    """transformers 4.57's Qwen3-Omni thinker runs only the experts its tokens hit: one token leaves the others
    without a gradient, which FSDP2 ranks routing differently cannot reduce-scatter alike (hooks/smoke/experts);
    Qwen3-VL-MoE's experts are one stacked parameter per layer and always get one."""
    import torch

    from hooks.smoke.experts import unrouted_experts

    thinker, patterns = _thinker(tiny_models("qwen3_omni_moe"))
    found = unrouted_experts(thinker, patterns)
    assert found.error == "" and found.checked == 2 and found.partial == ["model.layers.0.mlp.experts",
                                                                            "model.layers.1.mlp.experts"]
    assert found.example.startswith("model.layers.0.mlp.experts.") and found.model == type(thinker).__name__
    line = found.finding("a remedy")
    assert line.startswith("WARNING: experts no token reaches get no gradient") and line.endswith("; a remedy")
    assert "MindSpeed-MM's trainer has no switch for unused parameters" in line
    assert all(p.grad is None for p in thinker.parameters())  # left as it was found
    folder = tiny_models("qwen3_vl_moe")
    stacked = transformers_class(folder).from_pretrained(folder, dtype=torch.float32)
    plain = unrouted_experts(stacked, probe(folder, with_processor=False).plan.ep_modules)
    assert plain.checked == 2 and not plain.hazard and plain.finding() == ""


def transformers_class(folder: Path) -> Any:
    from hooks.model.loading import load_config_and_class

    return load_config_and_class(folder, trust_remote_code=False)[1]


@pytest.fixture(scope="module")
def routed_apart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3-Omni with 32 experts, one per token: two ranks' tokens are sure to reach different ones
    (with the published 4, top-2, every expert is hit in each of the smoke's batches; 128, top-8, at full size)."""
    from hooks.tiny import build_tiny_model, omni

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(omni, "MOE_EXPERTS", 32)
        patch.setattr(omni, "MOE_TOP_K", 1)
        return build_tiny_model("qwen3_omni_moe", tmp_path_factory.mktemp("routed-apart") / "qwen3_omni_moe")


def test_contract_smoke_trains_ranks_that_route_apart(routed_apart: Path) -> None:
    """Its ranks' tokens reach different experts (without zeros for the others gloo stops at step 1: "Received
    data size doesn't match expected size"); the contract smoke has the experts' FSDP units reduce zeros, as
    torch's FSDP2 offers, trains, and says that MindSpeed-MM's trainer cannot."""
    from hooks.smoke.contract import run_contract_smoke

    facts = probe(routed_apart, with_processor=False)
    plan = facts.plan
    result = run_contract_smoke(routed_apart, plan.apply_modules, steps=3, recompute=plan.recompute_modules,
                                fork=True, stage=facts.trained_submodule, experts=plan.ep_modules)
    assert result.passed, f"{result.summary()}\n{result.error}\n{result.log_tail[-2000:]}"
    warning = next(note for note in result.notes if note.startswith("WARNING: experts no token reaches"))
    assert "this contract smoke has the 2 FSDP unit(s) owning them reduce-scatter zeros instead" in warning


PLUGIN_WHOLE = '''
from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("qwen3_omni_moe")
class Omni(Base):
    @classmethod
    def _from_config(cls, config, **kwargs):
        return super()._from_config(config, **kwargs)
'''


def test_user_then_plugin_then_the_classes(tiny_models, tmp_path: Path) -> None:
    """The user's name wins, then the checkout plugin's choice (one that builds the published class included), then
    the classes' own evidence."""
    folder = tiny_models("qwen3_omni_moe")
    plugin = tmp_path / "checkout" / "mindspeed_mm" / "fsdp" / "models" / "omni"
    plugin.mkdir(parents=True)
    (plugin / "modeling.py").write_text(PLUGIN_WHOLE)
    whole = probe(folder, with_processor=False, checkout=tmp_path / "checkout")
    assert whole.trained_submodule is None and whole.architecture == "Qwen3OmniMoeForConditionalGeneration"
    assert probe(folder, with_processor=False, checkout=tmp_path / "empty").trained_submodule.name == "thinker"
    talker = probe(folder, with_processor=False, checkout=tmp_path / "checkout", trained_submodule="talker")
    assert talker.trained_submodule.name == "talker" and talker.trained_submodule.config_key == "talker_config"
    assert "named by the user" in talker.trained_submodule.reason


def test_two_understanding_stages_stop_with_the_field_to_answer() -> None:
    """Test doubles (plain torch modules) for the rule alone: a class without a forward whose two sub-models both
    have embeddings, media towers and a loss cannot be decided from the classes; the user must say."""
    import torch

    from hooks.model.stages import understanding_stage

    class Stage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = object()
            self.audio_tower = torch.nn.Linear(2, 2)
            self.embed = torch.nn.Embedding(4, 2)

        def get_input_embeddings(self) -> torch.nn.Module:
            return self.embed

        def forward(self, input_ids: Any = None, labels: Any = None) -> Any:
            loss = self.embed(input_ids).sum()
            return loss

    class Bundle(torch.nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            for i in range(n):
                self.add_module(f"stage{i}", Stage())

    one = understanding_stage(Bundle(1), object())
    assert one is not None and one.name == "stage0" and one.config_key == ""
    with pytest.raises(ProbeError, match=r"^trained_submodule: Bundle has no forward .*stage0, stage1.*--trained-sub"):
        understanding_stage(Bundle(2), object())


# Who names the thinker in the vendored checkout (MindSpeed-MM 57069cd5): its qwen3omni plugin for qwen3_omni_moe,
# the classes themselves for qwen2_5_omni (no in-repo plugin registers it). CI copies qwen3_omni_moe here; test_audio
# copies qwen2_5_omni (branch b, the generated sample) and checks its thinker there.
WHO_NAMES = {"qwen3_omni_moe": "MindSpeed-MM's in-repo plugin", "qwen2_5_omni": "read off the classes"}


@pytest.mark.tier2
@pytest.mark.parametrize("arch", ["qwen3_omni_moe", pytest.param("qwen2_5_omni", marks=pytest.mark.full_matrix)])
def test_copy_of_the_omni_bundle_trains_its_thinker(arch: str, mm_home: Path, tmp_path_factory: pytest.TempPathFactory,
                                                     tiny_models, template_src: Path) -> None:
    """Tier 2: a tiny omni bundle copied into the vendored checkout and trained through the real trainer on the
    generated sample (images and tones): the thinker is planned, the generated plugin builds it from thinker_config
    with the folder's thinker.* weights, the weight check and the loss reference agree with the trainer, and the
    clips reached forward and trained the audio tower. Qwen3-Omni's data path is the template derived from its
    release's chat template (the in-repo ones differ: qwen3_omni adds a think block, qwen3_omni_nothink pads each
    clip to the feature extractor's full window), and its experts no token reaches get no gradient: a WARNING
    in the verdict and in REPORT.md (this sample's batches reach every expert on both ranks)."""
    import yaml

    from tests.copier_run import copy, mm_checkout

    checkout = mm_checkout(mm_home, tmp_path_factory.mktemp("mm"))
    model_id = f"{arch}_tiny"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch))
    print(done.stdout[-6000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "smoke[framework] PASS" in done.stdout, done.stdout[-3000:]
    assert "verified: weights: 4 tensors equal the model folder's files" in done.stdout, done.stdout[-3000:]
    assert "verified: loss equivalence: step-1 loss" in done.stdout, done.stdout[-3000:]
    answers = yaml.safe_load((checkout / ".copier-answers" / f"{model_id}.yml").read_text())
    stage = answers["model_facts"]["trained_submodule"]
    assert stage["name"] == "thinker" and WHO_NAMES[arch] in stage["reason"]
    report = (checkout / "examples" / model_id / "MIGRATION.md").read_text()
    assert "**Trained sub-model**: `thinker`" in report and "`audio_tower` (audio)" in report
    assert "verified: audio reached forward (input_features" in done.stdout, done.stdout[-3000:]
    assert "and audio_tower got a gradient" in done.stdout
    if arch == "qwen3_omni_moe":
        assert "recommended data branch b:" in done.stdout and "data parity: MATCH" in done.stdout
        assert "in-repo template 'qwen3_omni_nothink' with the qwen3omni collator does not" in done.stdout
        assert "  WARNING: experts no token reaches get no gradient" in done.stdout
        measured = (checkout / "examples" / model_id / "REPORT.md").read_text()
        assert "- WARNING: experts no token reaches get no gradient" in measured


@pytest.mark.tier2
def test_the_trainer_stops_where_ranks_route_apart_and_says_why(routed_apart: Path, mm_home: Path,
                                                                 tmp_path_factory: pytest.TempPathFactory,
                                                                 template_src: Path) -> None:
    """Tier 2, the same 32-expert thinker through the real trainer on the generated sample (images and tones): the
    ranks' gradient sets differ at step 1 and the trainer stops; the smoke names that cause, not gloo's
    "Connection reset by peer", with the WARNING that explains it, here and in REPORT.md."""
    from tests.copier_run import copy, mm_checkout

    checkout = mm_checkout(mm_home, tmp_path_factory.mktemp("mm"))
    done = copy(checkout, skip_tasks=False, template=template_src, model_id="routed_apart", model_path=routed_apart)
    print(done.stdout[-6000:], done.stderr[-3000:])
    assert done.returncode != 0
    assert "smoke[framework] FAIL: 0/5 iterations, loss none (the ranks' FSDP2 gradient reduce-scatters differ in " \
           "size (gloo: Received data size doesn't match expected size)" in done.stdout, done.stdout[-3000:]
    assert "  WARNING: experts no token reaches get no gradient" in done.stdout
    assert "hint: experts no token reaches got no gradient" in done.stdout
    report = (checkout / "examples" / "routed_apart" / "REPORT.md").read_text()
    assert "- WARNING: experts no token reaches get no gradient" in report
