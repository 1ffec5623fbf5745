"""Tiny copies of published remote-code VLM releases (issue 21, deliverable 6): they load, train, and are probed.

Each family is built by ``hooks.tiny.published`` from a git mirror of its hub folder, read at build time;
without the mirror (CI machines have none) or a module its code imports, the family is skipped and the
reason names what is missing. Tier 1: ``AutoModel*``/``AutoTokenizer`` load the folder with
``trust_remote_code``, one forward with labels (inputs built the way the release's own code builds them)
gives a finite loss, and ``python -m hooks.probe`` concludes something about the folder (printed with
``-s``). Tier 2: ``copier copy --trust --defaults -d trust_remote_code=true`` into a real checkout, as a new
user runs it, ends as ``COPIES`` says: parity MATCH against the model's own ``chat()`` and a passing smoke, or
a non-zero exit before anything is written, in one line naming the cause.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from hooks.model.facts import ModelFacts
from hooks.tiny import published
from tests.copier_run import copy, mm_checkout
from tests.model_facts import stand_in_facts
from tests.test_render import ruff_check

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = sorted(published.RELEASES)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """Build a family once per module; skip (with the reason) when its mirror or a requirement is absent."""
    cache: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in cache:
            try:
                cache[family] = published.build(family, tmp_path_factory.mktemp("published") / family)
            except published.MirrorMissing as exc:
                pytest.skip(str(exc))
        return cache[family]

    return get


def _image(folder: Path) -> Path:
    """A 64x64 PNG beside the model (Qwen-VL reads images from paths written into the text)."""
    from PIL import Image

    path = folder.parent / "square.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(path)
    return path


def _qwen_vl_batch(folder: Path, model, tokenizer) -> dict:
    """Qwen-VL's own format: ``tokenizer.from_list_format`` writes ``<img>path</img>``; forward opens the path."""
    query = tokenizer.from_list_format([{"image": str(_image(folder))}, {"text": "What color is it?"}])
    text = f"<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\nRed.<|im_end|>\n"
    ids = tokenizer(text, return_tensors="pt").input_ids
    return {"input_ids": ids, "labels": ids.clone()}


def _internvl_batch(folder: Path, model, tokenizer) -> dict:
    """InternVL-Chat's own format: ``<img>`` + ``num_image_token`` x ``<IMG_CONTEXT>`` + ``</img>``, and the
    context token's id set on the model as ``chat()`` sets it; one 448x448 tile, ``image_flags`` 1."""
    import torch

    size = model.config.force_image_size
    model.img_context_token_id = tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>")
    image = "<img>" + "<IMG_CONTEXT>" * model.num_image_token + "</img>"
    text = f"<|im_start|>user\n{image}\nWhat color is it?<|im_end|>\n<|im_start|>assistant\nRed.<|im_end|>\n"
    ids = tokenizer(text, return_tensors="pt").input_ids
    return {"input_ids": ids, "labels": ids.clone(), "pixel_values": torch.randn(1, 3, size, size),
            "image_flags": torch.ones(1, 1, dtype=torch.long)}


def _phi3v_batch(folder: Path, model, tokenizer) -> dict:
    """Phi-3-V's own format: the release's processor turns ``<|image_1|>`` into ``num_img_tokens`` negative ids
    (-1 each, replaced by image features in forward) and returns the padded HD crops and ``image_sizes``."""
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
    text = "<|user|>\n<|image_1|>\nWhat color is it?<|end|>\n<|assistant|>\nRed.<|end|>\n"
    inputs = processor(text, [Image.new("RGB", (64, 64), (200, 30, 30))], return_tensors="pt")
    ids = inputs["input_ids"]
    return {"input_ids": ids, "attention_mask": inputs["attention_mask"], "pixel_values": inputs["pixel_values"],
            "image_sizes": inputs["image_sizes"], "labels": ids.masked_fill(ids < 0, -100)}


def _ovis2_batch(folder: Path, model, tokenizer) -> dict:
    """Ovis2's own format (its model card): ``model.preprocess_inputs`` formats the ``from``/``value`` conversation
    with the release's QwenConversationFormatter and replaces ``<image>`` by the visual tokenizer's placeholders
    (negative ids); ``pixel_values`` is a list of per-sample crop stacks, the mask is ``input_ids != pad``.
    The AIMv2 backbone is built by ``AutoModel.from_config`` in its own config's dtype (bfloat16, as the card
    loads the whole model), not the float32 asked of ``from_pretrained``; the model is made float32 throughout."""
    import torch
    from PIL import Image

    model.float()

    conversation = [{"from": "human", "value": "<image>\nWhat color is it?"}, {"from": "gpt", "value": "Red."}]
    _, ids, pixel_values, labels = model.preprocess_inputs(
        conversation, [Image.new("RGB", (64, 64), (200, 30, 30))], max_partition=9, generation_preface=None,
        return_labels=True)
    pad = model.get_text_tokenizer().pad_token_id
    return {"input_ids": ids[None], "attention_mask": torch.ne(ids, pad)[None], "labels": labels[None],
            "pixel_values": [pixel_values.to(model.dtype)]}


def _fastvlm_batch(folder: Path, model, tokenizer) -> dict:
    """FastVLM's own format (its model card, LLaVA's original code): the chat template split at ``<image>``, the
    text around it tokenized without specials and the sentinel -200 spliced between; the image preprocessed by the
    ``CLIPImageProcessor`` its vision tower builds; ``forward(images=...)`` extends the labels itself."""
    import torch
    from PIL import Image

    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "<image>\nWhat color is it?"}],
                                             add_generation_prompt=True, tokenize=False)
    pre, post = rendered.split("<image>", 1)
    ids = torch.tensor([tokenizer(pre, add_special_tokens=False).input_ids + [-200]
                        + tokenizer(post + "Red.<|im_end|>\n", add_special_tokens=False).input_ids])
    pixels = model.get_vision_tower().image_processor(images=Image.new("RGB", (64, 64), (200, 30, 30)),
                                                      return_tensors="pt")["pixel_values"]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "images": pixels,
            "labels": ids.masked_fill(ids < 0, -100)}


def _molmo_batch(folder: Path, model, tokenizer) -> dict:
    """Molmo's own format (the base model's card): ``processor.process(images=, text=)`` writes one sample's
    unbatched tensors (the image as ``<im_start>``/``<im_patch>``/``<im_col>``/``<im_end>`` vocabulary tokens whose
    positions ``image_input_idx`` holds, crops of ``images``, ``image_masks``), which the caller makes a batch of
    one; forward computes the loss itself. Labels train the answer only: the image tokens' ids lie past the output
    layer's rows (the class's 128 added embedding rows have no logits)."""
    import torch
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
    batch = {k: v[None] for k, v in processor.process(images=[Image.new("RGB", (64, 64), (200, 30, 30))],
                                                       text="What color is it?").items()}
    answer = torch.tensor([tokenizer(" Red." + tokenizer.eos_token, add_special_tokens=False).input_ids])
    prompt = batch.pop("input_ids")
    ids = torch.cat([prompt, answer], dim=1)
    return {**batch, "input_ids": ids, "labels": torch.cat([torch.full_like(prompt, -100), answer], dim=1)}


BATCHES = {"qwen_vl_chat": _qwen_vl_batch, "internvl2_2b": _internvl_batch, "internvl2_1b": _internvl_batch,
           "phi3_vision_128k": _phi3v_batch, "ovis2_4b": _ovis2_batch, "fastvlm_0_5b": _fastvlm_batch,
           "fastvlm_0_5b_nocard": _fastvlm_batch, "molmo_7b_d": _molmo_batch}


@pytest.mark.parametrize("family", FAMILIES)
def test_loads_and_gives_a_finite_loss(built, family: str) -> None:
    """The published code, loaded as a user loads it, trains on its own input format (float32 on CPU)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = built(family)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True, torch_dtype=torch.float32)
    model.train()
    out = model(**BATCHES[family](folder, model, tokenizer))
    assert math.isfinite(out.loss.item())
    out.loss.backward()


@pytest.mark.parametrize("family", FAMILIES)
def test_probe_concludes(built, family: str) -> None:
    """``python -m hooks.probe`` on the folder returns facts; convention, branch and problems are printed."""
    folder = built(family)
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(folder), "--json", "--trust-remote-code",
                           "--no-timings"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout)
    print(f"\n{family}: " + json.dumps(summary(facts), indent=1))
    assert facts["remote_code"] is True


def test_phi3_sample_format_is_read_off_its_processor(built) -> None:
    """Phi-3-vision's release: template on the tokenizer only, string content with the processor's numbered
    ``img_tokens`` marks, one string per processor call (its card's recipe), ``<|end|>`` closing an answer;
    a two-image, two-turn sample trains exactly the answers and their end of turn."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from PIL import Image
    from transformers import AutoProcessor

    from hooks.data.records import dataset_runtime, sample_format

    processor = AutoProcessor.from_pretrained(built("phi3_vision_128k"), trust_remote_code=True)
    form = sample_format(processor)
    assert form == {"kind": "chat", "end_of_turn": "<|end|>", "template_on": "tokenizer",
                    "image_mark": "<|image_{n}|>", "one_text": True}
    data = dataset_runtime()
    images = [Image.new("RGB", (64, 48), "red"), Image.new("RGB", (48, 64), "blue")]
    turns = [("user", "<image>What color?"), ("assistant", "Red."), ("user", "<image>And this?"),
             ("assistant", "Blue.")]
    sample = data.build_sample(processor, data.SampleFormat(**form), turns, images, 1 << 20)
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    assert int((ids < 0).sum()) > 0 and not bool((labels[ids < 0] != -100).any())  # image positions untrained
    assert processor.tokenizer.decode(ids[labels != -100]).replace(" ", "") == "Red.<|end|>\nBlue.<|end|>\n"


def test_phi3_branch_b_reads_the_tokenizer_template_and_names_why_it_is_not_slots(built) -> None:
    """Branch b reads the tokenizer's template with string content (issue 21, deliverable 4): the slots are the
    model's, and the numbered image marks are the one thing a slot cannot write; -d data_branch=b says so."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoProcessor

    from hooks.data.media import data_format
    from hooks.data.records import sample_format
    from hooks.render.validators import branch_error

    processor = AutoProcessor.from_pretrained(built("phi3_vision_128k"), trust_remote_code=True)
    found = data_format(processor, ["input_ids", "pixel_values", "image_sizes"], sample_format(processor))
    chat = found["chat"]
    assert chat["string_roles"] == ["user", "assistant", "system"]
    assert (chat["user_pre"], chat["user_post"], chat["end_of_turn"]) == ("<|user|>\n", "<|end|>\n<|assistant|>\n",
                                                                          "<|end|>")
    assert len(chat["problems"]) == 1 and "numbered ('<|image_1|>', '<|image_2|>'" in chat["problems"][0]
    message = branch_error("b", stand_in_facts("phi3_v", {"data_format": found}))
    assert message.startswith("data_branch: b derives a template") and "numbered" in message and "answer c" in message


def test_ovis2_method_is_read_off_its_model(built) -> None:
    """Ovis2's release: no processor class, no chat(); its own ``preprocess_inputs(..., return_labels=True)`` (the
    card's call) writes labelled samples in ShareGPT form. The plugin's runtime calls it on the model built without
    weights; media go to forward one entry per sample, a text-only sample getting a stand-in's."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from PIL import Image
    from transformers import AutoTokenizer

    from hooks.data.model_method import method_facts
    from hooks.data.records import dataset_runtime
    from hooks.model.build import build_structure
    from hooks.model.loading import load_config_and_class

    folder = built("ovis2_4b")
    config, cls, _ = load_config_and_class(folder, trust_remote_code=True)
    model, _, _ = build_structure(cls, config, folder)
    facts = method_facts(cls, model, folder, ["input_ids", "attention_mask", "labels", "pixel_values"], True)
    fmt = facts["sample_format"]
    assert fmt == {"kind": "method", "method": "preprocess_inputs", "turn_keys": ["from", "value"],
                   "roles": ["system", "human", "gpt"], "method_kwargs": [("generation_preface", None),
                                                                          ("return_labels", True)],
                   "per_sample": ["pixel_values"], "end_of_turn": "<|im_end|>"} and facts["problems"] == []
    data = dataset_runtime()
    form = data.SampleFormat(**{k: tuple(v) if isinstance(v, list) else v for k, v in fmt.items()})
    tokenizer = AutoTokenizer.from_pretrained(folder)
    code = data.ModelMethod(tokenizer, getattr(data.weightless(cls, str(folder)), fmt["method"]))
    sample = data.build_sample(code, form, [("user", "<image>What color?"), ("assistant", "Red.")],
                               [Image.new("RGB", (64, 48), "red")], 1 << 20)
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    assert tokenizer.decode(ids[labels != -100]) == "Red.<|im_end|>" and int((ids < 0).sum()) > 0
    text = data.build_sample(code, form, [("user", "Hi."), ("assistant", "Hello.")], [], 1 << 20)
    batch = data.collate([sample, text], tokenizer.pad_token_id, frozenset(["input_ids", "attention_mask",
                                                                            "pixel_values"]),
                         data.stand_ins(code, form))
    assert isinstance(batch["pixel_values"], list) and len(batch["pixel_values"]) == 2
    assert batch["pixel_values"][0] is sample["pixel_values"] and batch["input_ids"].shape[0] == 2


def test_molmo_processor_entry_is_the_recipe(built) -> None:
    """Molmo's release: a processor whose entry is its own ``process()`` (one sample's unbatched tensors) and a
    model that generates from a batch. The probe takes that call as the recipe (what reaches
    ``generate_from_batch``); the plugin's runtime trains the answer with the processor's leading space and EOS,
    drops the image's tokens from a text-only sample and stacks the media with -1 padding."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    import torch
    from PIL import Image
    from transformers import AutoProcessor

    from hooks.data.model_recipe import recipe_facts
    from hooks.data.records import dataset_runtime
    from hooks.model.loading import load_config_and_class

    folder = built("molmo_7b_d")
    _, cls, _ = load_config_and_class(folder, trust_remote_code=True)
    processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
    forward = ["input_ids", "attention_mask", "labels", "images", "image_masks", "image_input_idx"]
    facts = recipe_facts(cls, folder, forward, True, processor=processor)
    fmt = facts["sample_format"]
    assert facts["problems"] == [] and fmt == {
        "kind": "recipe", "end_of_turn": "<|endoftext|>", "per_sample": ["images", "image_input_idx", "image_masks"],
        "sentinels": [], "positions": ["image_input_idx"], "processor_method": "process",
        "generate_method": "generate_from_batch", "answer_prefix": " ", "stacked": True}
    data = dataset_runtime()
    form = data.SampleFormat(**{k: tuple(v) if isinstance(v, list) else v for k, v in fmt.items() if k != "sentinels"})
    recipe = data.ModelRecipe(processor.tokenizer, data.recording_model(cls, str(folder)),
                              data.processor_entry(processor, form))
    image = Image.new("RGB", (128, 64), "red")
    turns = [("user", "<image>\nWhat color?"), ("assistant", "Red.")]
    sample = data.build_sample(recipe, form, turns, [image], 1 << 20)
    own = processor.process(text="What color?", images=[image])
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    assert torch.equal(ids[:len(own["input_ids"])], own["input_ids"])
    assert processor.tokenizer.decode(ids[labels != -100]) == " Red.<|endoftext|>"
    text = data.build_sample(recipe, form, [("user", "Hi."), ("assistant", "Hello.")], [], 1 << 20)
    assert processor.tokenizer.decode(text["input_ids"][0]) == "<|endoftext|> User: Hi. Assistant: Hello.<|endoftext|>"
    batch = data.collate([sample, text], 0, frozenset(forward), data.stand_ins(recipe, form), stacked=True)
    crops = own["images"].shape[0]
    assert batch["images"].shape[:2] == (2, max(crops, batch["images"].shape[1])) and batch["images"].dim() == 4
    assert torch.equal(batch["image_input_idx"][0, :crops], own["image_input_idx"])
    assert int(batch["image_input_idx"][1].max()) == -1  # the stand-in's image is placed nowhere


def test_qwen_vl_context_is_read_off_its_code(built, tmp_path: Path) -> None:
    """Qwen-VL-Chat's release: no processor class, no chat template; its ``make_context`` with ``chat()``'s defaults
    rebuilds ``chat()``'s prompt, queries written by the tokenizer's ``from_list_format``; each image saved as a PNG
    the forward opens; a text-only batch gets a masked stand-in image span."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from PIL import Image
    from transformers import AutoTokenizer

    from hooks.data.model_code import code_modules, find_function
    from hooks.data.model_context import context_facts
    from hooks.data.records import dataset_runtime
    from hooks.model.build import build_structure
    from hooks.model.loading import load_config_and_class

    folder = built("qwen_vl_chat")
    config, cls, _ = load_config_and_class(folder, trust_remote_code=True)
    model, _, _ = build_structure(cls, config, folder)
    facts = context_facts(cls, model, folder, True)
    fmt = facts["sample_format"]
    assert facts["problems"] == [] and fmt == {
        "kind": "context", "function": "qwen_generation_utils.make_context", "system_message":
        "You are a helpful assistant.", "chat_format": "chatml", "end_of_turn": "<|im_end|>"}
    data = dataset_runtime()
    form = data.SampleFormat(**{k: v for k, v in fmt.items() if k != "function"})
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    code = data.ModelContext(tokenizer, find_function(code_modules(cls), "make_context"), tmp_path)
    red = Image.new("RGB", (64, 48), "red")
    turns = [("user", "<image>What color?"), ("assistant", "Red."), ("user", "Sure?"), ("assistant", "Yes.")]
    sample = data.build_sample(code, form, turns, [red], 1 << 20)
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    assert tokenizer.decode(ids[labels != -100]) == "Red.<|im_end|>Yes.<|im_end|>"
    (png,) = tmp_path.glob("*.png")
    assert str(png) in tokenizer.decode(ids) and list(Image.open(png).getdata()) == list(red.getdata())
    text = data.build_sample(code, form, [("user", "Hi."), ("assistant", "Hello.")], [], 1 << 20)
    batch = data.collate([text], 0, frozenset(["input_ids", "attention_mask"]), data.stand_ins(code, form))
    masked = batch["input_ids"][0][batch["attention_mask"][0] == 0]
    assert "<img>" in tokenizer.decode(masked) and bool((batch["labels"][0][batch["attention_mask"][0] == 0]
                                                          == -100).all())
    with_image = data.collate([sample], 0, frozenset(["input_ids", "attention_mask"]), data.stand_ins(code, form))
    assert with_image["input_ids"].shape == sample["input_ids"].shape  # it runs the vision tower already


def test_ovis2_plan_keeps_the_embedding_its_forward_calls_out_of_units(built) -> None:
    """Ovis2's forward embeds text through ``self.get_wte()(...)``, outside ``llm``'s forward: ``llm`` is no FSDP
    unit (its embedding would still be sharded there); its embeddings are found in ``llm`` for the plugin."""
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(built("ovis2_4b")), "--json",
                           "--trust-remote-code", "--no-timings"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=True)
    facts = json.loads(done.stdout)
    assert "llm" not in facts["plan"]["apply_modules"] and "llm.model.layers.{*}" in facts["plan"]["apply_modules"]
    assert facts["embeddings_in"] == "llm" and facts["auto_models"] == ["aimv2_visual_tokenizer"]
    assert facts["returns_loss"] is True  # its forward hands labels=labels to its language model


def test_qwen_vl_plan_leaves_the_tower_its_forward_enters_by_encode_out_of_units(built) -> None:
    """Qwen-VL's ``transformer.forward`` calls ``self.visual.encode(paths)``, not ``visual``'s forward: ``visual`` is
    no FSDP unit (its weights would still be sharded there); its blocks are. Its fp16/bf16/fp32 flags are found."""
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(built("qwen_vl_chat")), "--json",
                           "--trust-remote-code", "--no-timings"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=True)
    facts = json.loads(done.stdout)
    units = facts["plan"]["apply_modules"]
    assert "transformer.visual" not in units and "transformer.visual.transformer.resblocks.{*}" in units
    assert facts["precision_flags"] == ["bf16", "fp16", "fp32"]


def summary(facts: dict) -> dict:
    """The probe's conclusions a reviewer reads first (the keys differ little between families)."""
    from hooks.data.candidates import recommend

    keep = ("architecture", "num_parameters", "returns_loss", "media_tokens", "processor", "build")
    recommended = recommend(ModelFacts.from_dict(facts), None).to_dict()
    return {**{k: facts[k] for k in keep if k in facts}, "recommended": recommended}


# What a copy with defaults does, per release: the line it must print (a passing copy) or stop with.
COPIES = {
    # load_image only in the model card's quick-start, get_conv_template in conversation.py, chat() the reference
    "internvl2_1b": ("pass", "data parity: MATCH (the dataset plugin (the model's own data code and chat()))"),
    # the same code without its model card (a fine-tune's folder): no image preprocessing anywhere, so the copy
    # asks for a sample builder (test_a_sample_builder_supplies_what_the_release_lacks answers one)
    "internvl2_2b": ("stop", "error: sample_builder: the release ships no image preprocessing for its chat() "
                             "(neither the model's code nor its model card"),
    # images written into the text as <img>path</img> by the tokenizer and opened by forward: make_context and chat()
    "qwen_vl_chat": ("pass", "data parity: MATCH (the dataset plugin (the model's own make_context() and chat()))"),
    # the tokenizer's chat template, string content with the processor's numbered <|image_n|> marks, one string per
    # processor call: the model card's recipe is the parity reference
    "phi3_vision_128k": ("pass", "data parity: MATCH (the dataset plugin (the model's processor and chat template))"),
    # no processor class and no chat(): its model card's preprocess_inputs(), which writes labels itself
    "ovis2_4b": ("pass", "data parity: MATCH (the dataset plugin (the model's own preprocess_inputs(), as its model "
                         "card calls it))"),
    # LLaVA's original code: no processor (AutoProcessor guesses LlavaProcessor from the config class's name), the
    # image processor built inside the vision tower, the sentinel -200 spliced by the card's inline quick-start
    "fastvlm_0_5b": ("pass", "data parity: MATCH (the dataset plugin (the model card's quick-start code, what it "
                             "hands generate))"),
    # the same code without its card: nothing builds a sample, so the copy names the prompt builder's skeleton
    # command (test_a_prompt_builder_from_the_skeleton_and_the_card_trains answers it)
    "fastvlm_0_5b_nocard": ("stop", "error: sample_builder: nothing in the release builds a training sample"),
    # a processor whose entry is a named method (process(), one sample's unbatched tensors), generate_from_batch(),
    # image tokens placed by position media, media stacked with -1 padding, loss computed inside forward
    "molmo_7b_d": ("pass", "data parity: MATCH (the dataset plugin (the model's own processor.process(), what it "
                           "hands generate_from_batch()))"),
}


def _status(dest: Path) -> str:
    return subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "--ignored", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


# CI copies one release per convention it trains through a new path (code, recipe, the processor's entry method);
# --full-matrix copies every release (Phi-3-vision's 17-crop samples alone take two minutes on two cores).
COPY_CASES = [family if family in ("internvl2_1b", "fastvlm_0_5b", "fastvlm_0_5b_nocard", "molmo_7b_d", "qwen_vl_chat")
              else pytest.param(family, marks=pytest.mark.full_matrix) for family in FAMILIES]


@pytest.mark.tier2
@pytest.mark.parametrize("family", COPY_CASES)
def test_copy_with_defaults(built, family: str, mm_home: Path, tmp_path: Path) -> None:
    """A published release copied with defaults: verified end to end, or stopped before rendering in one line."""
    folder = built(family)
    dest = mm_checkout(mm_home, tmp_path)
    before = _status(dest)
    done = copy(dest, skip_tasks=False, model_id=family, model_path=folder, trust_remote_code=True)
    outcome, words = COPIES[family]
    print(f"\n{family}:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    if outcome == "pass":
        assert done.returncode == 0, done.stderr[-3000:]
        assert words in done.stdout
        assert "smoke[framework] PASS" in done.stdout and "verified: loss equivalence" in done.stdout
        generated = [dest / "mindspeed_mm/fsdp/models" / family / f"modeling_{family}.py",
                     dest / "mindspeed_mm/fsdp/data/datasets" / family]
        lint = ruff_check(*generated)
        assert lint.returncode == 0, lint.stdout  # the generated plugins, as a reviewer's ruff reads them
        return
    last = (done.stderr.strip().splitlines() or [""])[-1]
    assert done.returncode != 0
    assert last.startswith(words), last
    assert "Traceback" not in done.stderr
    assert _status(dest) == before


@pytest.mark.tier2
def test_a_sample_builder_supplies_what_the_release_lacks(built, mm_home: Path, tmp_path: Path) -> None:
    """InternVL2-2B's code without its card, answered with the base family's card preprocessing (InternVL2-1B's
    README.md ``load_image``, the published text) as the user's sample builder: the InternLM2 tokenizer's
    prompt is chat()'s token for token, the answer trained as that tokenizer writes it after the prompt."""
    from hooks.data import model_card

    folder, card_source = built("internvl2_2b"), built("internvl2_1b")
    builder = tmp_path / "internvl_builder.py"
    builder.write_text(model_card.module_text(card_source, "load_image"))
    dest = mm_checkout(mm_home, tmp_path)
    done = copy(dest, skip_tasks=False, model_id="internvl2_2b", model_path=folder, trust_remote_code=True,
                sample_builder=f"{builder}:load_image")
    print(f"\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("data parity: MATCH (the dataset plugin (your sample builder and the model's own conversation and "
            "chat()))") in done.stdout
    assert "smoke[framework] PASS" in done.stdout and "verified: loss equivalence" in done.stdout
    lint = ruff_check(dest / "mindspeed_mm/fsdp/data/datasets/internvl2_2b")
    assert lint.returncode == 0, lint.stdout


# What a user writes into the prompt builder's skeleton, read off FastVLM's model card (its quick-start's steps
# before generate, as a function of the skeleton's parameters): nothing of msmm-migrate's is used.
CARD_STEPS = """    messages = [{"role": "user", "content": text}]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    pre, post = rendered.split("<image>", 1)
    pre_ids = tokenizer(pre, return_tensors="pt", add_special_tokens=False).input_ids
    post_ids = tokenizer(post, return_tensors="pt", add_special_tokens=False).input_ids
    input_ids = torch.cat([pre_ids, torch.tensor([[-200]], dtype=pre_ids.dtype), post_ids], dim=1)
    px = model.get_vision_tower().image_processor(images=images[0], return_tensors="pt")["pixel_values"]
    return {"inputs": input_ids, "attention_mask": torch.ones_like(input_ids), "images": px}
"""


@pytest.mark.tier2
def test_a_prompt_builder_from_the_skeleton_and_the_card_trains(built, mm_home: Path, tmp_path: Path) -> None:
    """FastVLM's code without its card stops naming ``python -m hooks.data.builder ... --contract prompt``; the
    skeleton that command writes, its body filled with the card's steps, trains on the first try: parity MATCH
    against the builder's own prompt, the real trainer's smoke with loss equivalence."""
    folder = built("fastvlm_0_5b_nocard")
    builder = tmp_path / "my_builder.py"
    done = subprocess.run([sys.executable, "-m", "hooks.data.builder", str(folder), "--skeleton", str(builder),
                           "--contract", "prompt"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert f"-d sample_builder={builder}:build_prompt" in done.stdout
    text = builder.read_text()
    assert "IMAGE_TOKEN_INDEX = -200" in text and "model.get_vision_tower().image_processor" in text
    builder.write_text(text.replace("    raise NotImplementedError(\"write the model card's inference recipe here\")\n",
                                    CARD_STEPS))
    dest = mm_checkout(mm_home, tmp_path)
    done = copy(dest, skip_tasks=False, model_id="fastvlm_nocard", model_path=folder, trust_remote_code=True,
                sample_builder=f"{builder}:build_prompt")
    print(f"\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "data parity: MATCH (the dataset plugin (your prompt builder, what it hands generate))" in done.stdout
    assert "smoke[framework] PASS" in done.stdout and "verified: loss equivalence" in done.stdout
    assert (dest / "mindspeed_mm/fsdp/models/fastvlm_nocard/remote_code/sample_builder.py").read_text() == \
        builder.read_text()
    lint = ruff_check(dest / "mindspeed_mm/fsdp/data/datasets/fastvlm_nocard")
    assert lint.returncode == 0, lint.stdout
