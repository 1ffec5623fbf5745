"""Fuyu and Kosmos-2: no chat template, the processor places the image and writes its own prompt (tier 1).

The tiny builds load through the Auto classes and run a training step; ``sample_format`` reads the
``prompt`` convention off each processor (the record's prompt is used: neither writes a query of its
own); a sample built by branch c's runtime trains the answer and the end of turn only, every token the
processor wrote (image slots, BOS, prompt, Fuyu's ``<0x04>``) masked; and a batch of differently sized
images collates into what the model's forward takes.
"""

from __future__ import annotations

import inspect

import pytest

from hooks.data.records import dataset_runtime, sample_format

ARCHS = ("fuyu", "kosmos2")
TURNS = [("user", "What color is this?"), ("assistant", "It is red.")]
# What the processor writes after the prompt (Fuyu's beginning of answer) and the end of turn after the answer.
PROMPT_END = {"fuyu": "<0x04>", "kosmos2": "?"}
END_OF_TURN = {"fuyu": "|ENDOFTEXT|", "kosmos2": "</s>"}


@pytest.fixture(scope="module")
def loaded(tiny_models):
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    import transformers

    cache: dict[str, tuple] = {}

    def get(arch: str) -> tuple:
        if arch not in cache:
            path = tiny_models(arch)
            config = transformers.AutoConfig.from_pretrained(path)
            model_class = getattr(transformers, config.architectures[0])
            cache[arch] = (transformers.AutoProcessor.from_pretrained(path), model_class.from_pretrained(path))
        return cache[arch]

    return get


def _image(width: int = 80, rgb: tuple[int, int, int] = (220, 30, 30)):
    from PIL import Image

    return Image.new("RGB", (width, 64), rgb)


def _sample(processor, turns=TURNS, image=None):
    rt = dataset_runtime()
    return rt.build_sample(processor, rt.SampleFormat(**sample_format(processor)), turns,
                           [image or _image()], 4096)


@pytest.mark.parametrize("arch", ARCHS)
def test_sample_format_is_the_processors_prompt_with_the_records_prompt(arch: str, loaded) -> None:
    processor, _ = loaded(arch)
    assert getattr(processor, "chat_template", None) is None
    assert sample_format(processor) == {"kind": "prompt", "end_of_turn": END_OF_TURN[arch], "own_query": False}


@pytest.mark.parametrize("arch", ARCHS)
def test_only_the_answer_and_end_of_turn_are_trained(arch: str, loaded) -> None:
    processor, _ = loaded(arch)
    sample = _sample(processor)
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    trained = (labels != -100).nonzero().flatten()
    first = int(trained[0])
    assert trained.tolist() == list(range(first, len(ids)))  # one run, to the end
    assert processor.tokenizer.decode(ids[first:]).strip() == "It is red." + END_OF_TURN[arch]
    assert labels[first:].tolist() == ids[first:].tolist()
    prompt = processor.tokenizer.convert_ids_to_tokens(ids[:first].tolist())
    assert prompt[-1] == PROMPT_END[arch]  # the processor's own prompt, untouched, right before the answer
    own = processor(text=["What color is this?"], images=[_image()], return_tensors="pt")
    assert ids[:first].tolist() == own["input_ids"][0].tolist()
    assert sample["attention_mask"].shape == ids[None].shape
    if arch == "fuyu":  # image patch and row-end tokens, BOS and the beginning of answer: all masked
        assert {"|SPEAKER|", "|NEWLINE|", "<s>", "<0x04>"} <= set(prompt)
        indices = sample["image_patches_indices"][0]  # cut to the sample; the answer is no patch
        assert indices.shape == ids.shape and (indices[first:] == -1).all()
        assert int((indices >= 0).sum()) == sample["image_patches"].shape[1]
    else:  # the latent-query slots between <image> and </image>, marked only there
        mask = sample["image_embeds_position_mask"][0]
        assert mask.shape == ids.shape and int(mask.sum()) == 64 and not mask[first:].any()
        assert prompt[:2] == ["<s>", "<image>"] and "</image>" in prompt


@pytest.mark.parametrize("arch", ARCHS)
def test_a_batch_of_differently_sized_images_trains(arch: str, loaded) -> None:
    import torch

    rt = dataset_runtime()
    processor, model = loaded(arch)
    one = _sample(processor, image=_image(80))
    two = _sample(processor, [("user", "And this?"), ("assistant", "A much longer answer: it is blue.")],
                  image=_image(112, (30, 40, 220)))
    keys = frozenset(inspect.signature(type(model).forward).parameters)
    batch = rt.collate([one, two], processor.tokenizer.pad_token_id or 0, keys)
    assert batch["labels"].shape == batch["input_ids"].shape and batch["input_ids"].shape[0] == 2
    if arch == "fuyu":  # patches per image differ: a list, as the processor itself batches them
        assert isinstance(batch["image_patches"], list) and len(batch["image_patches"]) == 2
        assert batch["image_patches_indices"].shape == batch["input_ids"].shape
    model.zero_grad()
    loss = model(**batch).loss
    assert torch.isfinite(loss) and loss.item() > 0
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
