"""Branch C without the framework: samples built by each model's own processor from records of any shape.

``partials/processor_dataset.py`` is the code the generated dataset plugin runs; here it runs on the
real processors of the tiny families, one per convention (chat template, PaliGemma's ``suffix=``,
a processor-written prompt), and on the field mapping a user gives at copy time (tier 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hooks.data.records import dataset_runtime, fields_error, parse_fields, sample_format

RECORD = {"img": "x.png", "q": "What color is this?", "a": "It is red."}
FIELDS = {"images": "img", "prompt": "q", "response": "a"}
MULTI = [("user", "<image>What color is this?"), ("assistant", "Red."), ("user", "Sure?"), ("assistant", "Yes.")]


@pytest.fixture(scope="module")
def processors(tiny_models):
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoProcessor

    return lambda arch: AutoProcessor.from_pretrained(str(tiny_models(arch)))


def _image():
    from PIL import Image

    return Image.new("RGB", (80, 64), (220, 30, 30))


def _trained(processor, sample) -> str:
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    return processor.tokenizer.decode(ids[labels != -100])


@pytest.mark.parametrize(("arch", "kind", "trained"), [
    ("qwen2_5_vl", "chat", "It is red.<|im_end|>\n"),
    ("gemma3", "chat", "It is red.<end_of_turn>\n"),
    ("llava", "chat", " It is red. "),  # the template writes "ASSISTANT: answer " (no end-of-turn token)
    ("paligemma", "suffix", "It is red.<eos>"),
    ("got_ocr2", "prompt", "It is red.<|im_end|>"),
    ("chameleon", "prompt", "It is red.</s>"),
])
def test_processor_builds_the_sample_and_only_the_answer_is_trained(arch, kind, trained, processors) -> None:
    rt = dataset_runtime()
    proc = processors(arch)
    fmt = rt.SampleFormat(**sample_format(proc))
    assert fmt.kind == kind
    sample = rt.build_sample(proc, fmt, rt.FieldMap(**FIELDS).turns(RECORD), [_image()], 4096)
    assert _trained(proc, sample) == trained
    assert "pixel_values" in sample and sample["attention_mask"].shape == sample["input_ids"].shape
    if kind == "chat":  # the ids are the processor's own for the model's own rendering of the conversation
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": RECORD["q"]}]},
                    {"role": "assistant", "content": [{"type": "text", "text": RECORD["a"]}]}]
        own = proc(text=[proc.apply_chat_template(messages, tokenize=False)], images=[[_image()]],
                   return_tensors="pt", add_special_tokens=False if arch != "llava" else True)
        assert sample["input_ids"].tolist() == own["input_ids"].tolist()


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "gemma3", "llava", "idefics3"])
def test_every_answer_of_a_conversation_is_trained(arch: str, processors) -> None:
    rt = dataset_runtime()
    proc = processors(arch)
    sample = rt.build_sample(proc, rt.SampleFormat("chat"), MULTI, [_image()], 4096)
    text = _trained(proc, sample)
    assert "Red." in text and "Yes." in text and "Sure" not in text and "color" not in text


def test_got_ocr2_writes_its_own_query(processors) -> None:
    assert sample_format(processors("got_ocr2")) == {"kind": "prompt", "end_of_turn": "<|im_end|>", "own_query": True}
    assert sample_format(processors("chameleon"))["own_query"] is False


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "gemma3", "paligemma", "mllama"])
def test_collate_pads_concatenates_and_gives_text_only_batches_a_stand_in(arch: str, processors) -> None:
    import torch

    rt = dataset_runtime()
    proc = processors(arch)
    fmt = rt.SampleFormat(**sample_format(proc))
    keys = frozenset({"input_ids", "attention_mask", "pixel_values", "image_grid_thw", "token_type_ids",
                      "cross_attention_mask", "aspect_ratio_ids", "aspect_ratio_mask"})
    fields = rt.FieldMap(**FIELDS)
    one = rt.build_sample(proc, fmt, fields.turns(RECORD), [_image()], 4096)
    two = rt.build_sample(proc, fmt, fields.turns({**RECORD, "a": "A much longer answer, red."}), [_image()], 4096)
    batch = rt.collate([one, two], proc.tokenizer.pad_token_id or 0, keys)
    assert batch["input_ids"].shape[0] == 2 and batch["labels"].shape == batch["input_ids"].shape
    assert set(batch) <= keys | {"labels"}
    short = one["input_ids"].shape[1]
    assert (batch["labels"][0, short:] == -100).all() and (batch["attention_mask"][0, short:] == 0).all()
    if "cross_attention_mask" in batch:  # laid over the tokens: padded with them (Mllama)
        assert batch["cross_attention_mask"].shape[:2] == batch["input_ids"].shape
    if fmt.kind == "suffix" or arch == "mllama":
        return  # PaliGemma needs an image in every sample; Mllama's stand-in is checked by parity (tier 2)
    text_only = rt.build_sample(proc, fmt, [("user", "Say hi."), ("assistant", "Hi.")], [], 4096)
    assert "pixel_values" not in text_only
    stand_in = rt.stand_ins(proc, fmt)
    batch = rt.collate([text_only, text_only], proc.tokenizer.pad_token_id or 0, keys, stand_in)
    assert "pixel_values" in batch, "the vision tower must run on every rank"
    length = text_only["input_ids"].shape[1]
    assert batch["attention_mask"][0, length:].sum() == 0 and (batch["labels"][0, length:] == -100).all()
    assert torch.equal(batch["labels"][0, :length], text_only["labels"][0])
    mixed = rt.collate([text_only, one], proc.tokenizer.pad_token_id or 0, keys, stand_in)  # real data mixes them
    assert torch.equal(mixed["pixel_values"], one["pixel_values"]) and mixed["input_ids"].shape[0] == 2


def test_field_mapping_is_checked_where_it_is_given(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps(RECORD) + "\n" + json.dumps(RECORD) + "\n")
    assert parse_fields("") == {} and parse_fields(json.dumps(FIELDS)) == FIELDS
    assert fields_error(str(data), json.dumps(FIELDS)) == ""
    assert "unknown field(s) ['question']" in fields_error(str(data), '{"question": "q"}')
    assert "not a JSON object" in fields_error(str(data), "{images: img}")
    message = fields_error(str(data), '{"prompt": "q"}')
    assert message.startswith("data_fields: ") and "response" in message  # the field left out is named
    message = fields_error(str(data), '{"images": "img", "prompt": "question", "response": "a"}')
    assert message.startswith("data_fields: ") and "'question'" in message and str(data) in message
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"img": "x.png", "turns": [{"from": "human", "value": "<image>Q"},
                                                           {"from": "gpt", "value": "A"}]}) + "\n")
    assert fields_error(str(turns), '{"images": "img", "conversations": "turns"}') == ""


def test_media_a_forward_never_reads_are_found() -> None:
    """transformers 4.57.1's Emu3 forward drops ``pixel_values``: found, so the copy stops before a smoke that
    would pass on text alone; a forward that uses its media is not flagged."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    import transformers

    from hooks.model.source import unused_media_params

    assert unused_media_params(transformers.Emu3ForConditionalGeneration) == ["pixel_values", "image_sizes"]
    assert unused_media_params(transformers.Qwen2_5_VLForConditionalGeneration) == []
    assert unused_media_params(transformers.PaliGemmaForConditionalGeneration) == []


def test_string_content_templates_get_the_processors_own_numbered_marks() -> None:
    """Phi-3-vision's template reads string content: each image becomes the processor's mark, numbered from 1
    over the conversation, with the newline its model card writes after it (not doubled)."""
    data = dataset_runtime()
    typed = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]},
             {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
             {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "\nAnd this?"},
                                          {"type": "image"}]}]
    read = data.as_template_reads(typed, (), "<|image_{n}|>")
    assert [m["content"] for m in read] == ["<|image_1|>\nWhat is it?", "A cat.",
                                            "<|image_2|>\nAnd this?<|image_3|>\n"]
    # without a mark: typed items stay, a text-only turn of a string role becomes a string (GLM-4.1V)
    assert data.as_template_reads(typed, ("assistant",))[1]["content"] == "A cat."
    assert data.as_template_reads(typed, ())[0]["content"] == typed[0]["content"]


class MarkedProcessorDouble:
    """A test double (attributes only) shaped like Phi3VProcessor: a numbered list of image marks beside other
    strings; no processor call is made on it."""

    img_tokens = [f"<|image_{n}|>" for n in range(1, 6)]
    special_image_token = "<|image|>"
    chat_template = None
    name = "processor"


def test_image_marks_are_read_off_the_processors_attributes() -> None:
    from hooks.data.records import image_marks

    assert image_marks(MarkedProcessorDouble()) == ["<|image_{n}|>", "<|image|>"]


def test_cutoff_holds_two_images_where_one_image_is_long() -> None:
    from hooks.model.memory import CUTOFF_LEN, sample_cutoff

    assert sample_cutoff(300) == CUTOFF_LEN == 2048
    assert sample_cutoff(2533) == 8192  # Phi-3-vision: 17 HD crops
    assert sample_cutoff(0) == CUTOFF_LEN


def test_closing_tokens_are_the_special_tokens_after_an_answer() -> None:
    from hooks.data.chat_format import closing_tokens

    assert closing_tokens("<|end|>\n", ["<|end|>", "<|endoftext|>"]) == ["<|end|>"]
    assert closing_tokens("<|END_RESPONSE|><|END_OF_TURN_TOKEN|>", ["<|END_OF_TURN_TOKEN|>", "<|END_RESPONSE|>"]) \
        == ["<|END_RESPONSE|>", "<|END_OF_TURN_TOKEN|>"]
    assert closing_tokens("\n", ["<|end|>"]) == []
