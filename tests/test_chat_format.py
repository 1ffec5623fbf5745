"""Branch B without the framework: the chat format read off each family's own template, and media
expanded by each family's own processor, checked against that template and processor (tier 1).

- the derived slots reproduce the model's own chat-template text for every sentinel shape;
- with media expanded by ``processor_media`` (the code the checkout runs), the whole conversation
  tokenizes to exactly the ids the model's processor produces, for two image sizes;
- the trained (assistant-slot) text of every turn is the answer followed by its end-of-turn token.
"""

from __future__ import annotations

import pytest

from hooks.data.chat_format import A1, U1, ChatFormat, _message, derive, derive_for

IMG = {"type": "image"}


def T(text: str) -> list[dict]:
    return [{"type": "text", "text": text}]


SHAPES = {
    "plain": [("user", T("What color is this?")), ("assistant", T("Mostly red."))],
    "system": [("system", T("You are terse.")), ("user", T("What color?")), ("assistant", T("Red."))],
    "multi_turn": [("user", T("What color?")), ("assistant", T("Red.")), ("user", T("And the square?")),
                   ("assistant", T("Blue."))],
    "image": [("user", [IMG, *T("What color is this?")]), ("assistant", T("Mostly red."))],
    "two_images": [("user", [IMG, IMG, *T("Compare them.")]), ("assistant", T("Both red."))],
    "image_system_multi_turn": [("system", T("Be brief.")), ("user", [IMG, *T("What color?")]),
                                ("assistant", T("Red.")), ("user", T("Sure?")), ("assistant", T("Yes."))],
}
# Families with a chat template (the tiny builds copy the published ones). paligemma and got_ocr2
# ship none (branch C); chameleon's tiny build has none either.
FAMILIES = ["llava", "llava_next", "llava_next_video", "pixtral", "mistral3", "llava_onevision", "aya_vision",
            "cohere2_vision", "aria", "lfm2_vl", "perception_lm", "internvl", "gemma3", "gemma3n", "idefics2",
            "idefics3", "smolvlm", "mllama", "janus", "emu3", "deepseek_vl", "deepseek_vl_hybrid", "ovis2", "llama4",
            "glm4v", "glm4v_moe", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"]


@pytest.fixture(scope="module")
def processors(tiny_models):
    from hooks.compat import ensure_torchvision

    ensure_torchvision()  # before transformers: its processors import torchvision
    from transformers import AutoProcessor

    loaded = {}

    def get(arch: str):
        if arch not in loaded:
            loaded[arch] = AutoProcessor.from_pretrained(str(tiny_models(arch)))
        return loaded[arch]

    return get


def conversation(fmt: ChatFormat, shape: str) -> list[dict]:
    return [_message(role, items, fmt.string_roles) for role, items in SHAPES[shape]]


@pytest.mark.parametrize("arch", FAMILIES)
def test_derived_slots_reproduce_the_models_own_template(arch: str, processors) -> None:
    proc = processors(arch)
    fmt = derive_for(proc)
    assert fmt is not None and fmt.expressible, fmt and fmt.problems
    for shape in SHAPES:
        conv = conversation(fmt, shape)
        assert fmt.render(conv) == proc.apply_chat_template(conv, tokenize=False), shape


@pytest.mark.parametrize("arch", FAMILIES)
def test_expanded_media_tokenize_as_the_processor_does(arch: str, processors) -> None:
    """Text with each image expanded in place (processor_media) -> exactly the processor's own ids."""
    from hooks.data.media import data_format, expansion_problem

    proc = processors(arch)
    facts = data_format(proc, ["pixel_values"])
    sizes = [(64, 64), (96, 48)] if arch != "perception_lm" else [(64, 64), (128, 64)]
    for case in [(size,) for size in sizes] + ([tuple(sizes)] if arch != "perception_lm" else []):
        problem = expansion_problem(proc, facts["chat"], facts["media"], case)
        if arch == "emu3":  # its processor puts a BOS at the sample's start for each image: not in place
            assert "depends on where it stands" in problem
        else:
            assert problem == "", (case, problem)


@pytest.mark.parametrize("arch", FAMILIES)
def test_trained_text_is_the_answer_and_its_end_of_turn(arch: str, processors) -> None:
    fmt = derive_for(processors(arch))
    assistant_slot = A1 + fmt.assistant_post
    assert assistant_slot.startswith(A1 + fmt.end_of_turn)
    assert A1 not in fmt.prefix + fmt.system_pre + fmt.user_pre + U1 + fmt.user_post


def test_a_turn_dependent_template_is_not_slots() -> None:
    """A template that numbers its turns cannot be written as fixed slots: say so, do not guess."""
    import jinja2

    template = jinja2.Environment().from_string(
        "{% for m in messages %}{% if m.role == 'user' %}Q{{ loop.index }}: {{ m.content }}\n"
        "{% else %}A: {{ m.content }}\n{% endif %}{% endfor %}")

    def render(messages: list[dict], generation: bool) -> str:
        plain = [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str)
                  else "".join(i.get("text", "") for i in m["content"])} for m in messages]
        return template.render(messages=plain)

    fmt = derive(render)
    assert not fmt.expressible and "not expressible as slots" in fmt.problems[0]


def test_gemma_system_prompt_goes_into_the_first_user_turn(processors) -> None:
    fmt = derive_for(processors("gemma3"))
    assert fmt.system_in_first_user == "\n\n" and fmt.prefix == "<bos>"


def test_glm45v_empty_think_block_stays_on_the_prompt_side(processors) -> None:
    fmt = derive_for(processors("glm4v_moe"))
    assert fmt.user_post.endswith("<think></think>\n") and fmt.history_lead == "<think></think>\n"


VIDEO_FAMILIES = ["llava_onevision", "llava_next_video", "internvl", "smolvlm", "glm4v", "qwen2_vl", "qwen3_vl"]


@pytest.mark.parametrize("arch", VIDEO_FAMILIES)
def test_video_expansion_takes_the_clips_frame_rate(arch: str, processors) -> None:
    """Every video family's processor takes a clip with its metadata (processor_media passes the rate
    its frames were sampled at), and the rate is used: Qwen3-VL writes the frames' times (4 frames at
    2 fps: pairs at 0.25 s and 1.25 s; at the processor's 24-fps fallback both would read 0.0 s)."""
    from hooks.data.media import data_format, media_runtime, sample_video

    proc = processors(arch)
    facts = data_format(proc, ["pixel_values", "pixel_values_videos"])
    item = facts["media"]["video_item"]
    assert item, f"{arch}: no video item derived"
    text = media_runtime().expand(proc, item, video=sample_video(4, 2.0), prefix=facts["media"]["item_prefix"])
    assert len(proc.tokenizer(text, add_special_tokens=False)["input_ids"]) > 4, text
    if arch == "qwen3_vl":
        assert "<0.2 seconds>" in text and "<1.2 seconds>" in text, text


# --- a chat template on the tokenizer only (issue 21, deliverable 4) -----------------------------------------

STRING_ONLY = ("{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
               "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}")  # Phi-3's form


def test_a_template_kept_on_the_tokenizer_only_gives_the_same_slots(tiny_models, processors, tmp_path) -> None:
    """Releases that keep the template in tokenizer_config.json: branch b reads it off the tokenizer."""
    from transformers import AutoProcessor

    from hooks.data.media import data_format
    from hooks.data.records import sample_format
    from tests.samples import template_on_tokenizer

    moved = AutoProcessor.from_pretrained(str(template_on_tokenizer(tiny_models("qwen2_5_vl"), tmp_path / "tok")))
    assert not moved.chat_template and moved.tokenizer.chat_template
    form = sample_format(moved)
    assert form == {"kind": "chat", "end_of_turn": "<|im_end|>", "template_on": "tokenizer"}
    params = ["input_ids", "attention_mask", "pixel_values", "image_grid_thw"]
    base = processors("qwen2_5_vl")
    assert data_format(moved, params, form) == data_format(base, params, sample_format(base))


def test_a_string_only_template_gets_string_content(processors) -> None:
    """A template that concatenates ``message['content']`` is fed strings; images are the processor's mark."""
    import copy

    tokenizer = copy.deepcopy(processors("qwen2_5_vl").tokenizer)
    tokenizer.chat_template = STRING_ONLY
    fmt = derive_for(tokenizer, tokenizer, "<image>")
    assert fmt.string_roles == ["user", "assistant", "system"] and fmt.expressible, fmt.problems
    assert (fmt.user_pre, fmt.user_post, fmt.image_item) == ("<|user|>\n", "<|end|>\n<|assistant|>\n", "<image>\n")
    numbered = derive_for(tokenizer, tokenizer, "<|image_{n}|>")
    assert any("numbered ('<|image_1|>', '<|image_2|>'" in p for p in numbered.problems)
    assert not derive_for(tokenizer, tokenizer).expressible  # no mark: no way to write an image
