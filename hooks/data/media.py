"""Media facts for branch B, read from the model's own processor, and the runtime code that uses them.

The expansion itself runs in the user's checkout, in ``processor_media.py`` next to the generated
data plugin (a verbatim copy of ``partials/processor_media.py``). This module loads that same file,
so what the probe derives, what the tests check and what the checkout runs are one piece of code.
Derived here, once per model, because they need the processor and a sample image:

- ``item_prefix``: a processor that inserts a BOS before a leading image (Mllama) must see the item
  after a BOS to expand it as it would mid-conversation;
- ``token_types``: which token ids the processor marks in ``token_type_ids`` (Gemma 3's image soft
  tokens), so the data path can mark the batch's own ids the same way;
- ``batch_keys``: the processor outputs the model's ``forward`` takes (others never reach the batch);
- ``video_item`` is kept only when the processor has a video processor.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from hooks import TEMPLATE_ROOT, load_partial
from hooks.data import first_difference

MEDIA_RUNTIME = TEMPLATE_ROOT / "partials" / "processor_media.py"


def media_runtime() -> ModuleType:
    """``partials/processor_media.py`` as a module (the same file branch b's plugin imports)."""
    return load_partial("processor_media.py")


def sample_image(size: tuple[int, int] = (64, 64), color: tuple[int, int, int] = (200, 30, 30)) -> Any:
    from PIL import Image

    return Image.new("RGB", size, color)


def media_facts(processor: Any, chat: dict[str, Any], forward_params: list[str]) -> dict[str, Any]:
    """What the generated ``MediaFormat`` needs besides the chat format (see the module docstring)."""
    facts: dict[str, Any] = {"item_prefix": "", "token_types": {}, "video_item": chat.get("video_item"),
                             "batch_keys": []}
    if chat.get("audio_item"):
        audio_media_facts(processor, chat, forward_params, facts)
    item, bos = chat.get("image_item"), getattr(processor.tokenizer, "bos_token", None)
    if not item:
        facts["video_item"] = None
        return facts
    media = media_runtime()
    if bos and bos not in item and bos in media.expand(processor, item, image=sample_image()):
        facts["item_prefix"] = bos
    out = media._call(processor, [facts["item_prefix"] + item], [[sample_image()]], None)
    facts["batch_keys"] = sorted(set(facts["batch_keys"]) | (set(out) & set(forward_params) - set(media.TEXT_KEYS)))
    if "token_type_ids" in out:
        pairs = zip(out["input_ids"][0].tolist(), out["token_type_ids"][0].tolist(), strict=True)
        facts["token_types"].update({str(token): kind for token, kind in pairs if kind})
    if facts["video_item"] and getattr(processor, "video_processor", None) is not None:
        try:
            out = media._call(processor, [facts["item_prefix"] + facts["video_item"]], None, [[sample_video()]])
            taken = set(out) & set(forward_params) - set(media.TEXT_KEYS)
            facts["batch_keys"] = sorted(set(facts["batch_keys"]) | taken)
        except Exception:  # noqa: BLE001 - the processor cannot take our sample video: no video in branch b
            facts["video_item"] = None
    else:
        facts["video_item"] = None
    return facts


def audio_media_facts(processor: Any, chat: dict[str, Any], forward_params: list[str], facts: dict[str, Any]) -> None:
    """The template's audio item, the keyword and rate the processor takes clips by, and the audio inputs it
    returns that ``forward`` takes, into ``facts`` (branch b's ``MediaFormat``): one clip, called as the plugin
    calls it."""
    from hooks.data.audio import audio_kwarg, sample_clip, sampling_rate

    media = media_runtime()
    facts.update(audio_item=chat["audio_item"], audio_kwarg=audio_kwarg(processor) or "audio",
                 sampling_rate=sampling_rate(processor))
    out = media._call(processor, [chat["audio_item"]], None, None, [[sample_clip()]], media_format(chat, facts))
    facts["batch_keys"] = sorted(set(facts["batch_keys"]) | (set(out) & set(forward_params) - set(media.TEXT_KEYS)))
    if "token_type_ids" in out:  # Gemma 3n marks its audio soft tokens (type 3) as it marks image ones
        pairs = zip(out["input_ids"][0].tolist(), out["token_type_ids"][0].tolist(), strict=True)
        facts["token_types"].update({str(token): kind for token, kind in pairs if kind})


def sample_video(frames: int = 4, fps: float = 2.0) -> Any:
    """A short clip as the data path hands it to the processor: decoded frames and their rate."""
    return media_runtime().Clip([sample_image(color=(40 * i, 30, 200 - 40 * i)) for i in range(frames)], fps)


def media_format(chat: dict[str, Any], media: dict[str, Any]) -> Any:
    """The runtime ``MediaFormat`` from frozen facts (what the generated plugin builds from its constants)."""
    audio = {key: media[key] for key in ("audio_item", "audio_kwarg", "sampling_rate") if media.get(key)}
    return media_runtime().MediaFormat(
        image_item=chat["image_item"], video_item=media["video_item"], item_prefix=media["item_prefix"],
        text_lead=chat["text_lead"], no_lead_after=tuple(f"<{kind}>" for kind in chat["no_lead_after"]),
        batch_keys=frozenset(media["batch_keys"]), token_types={int(k): v for k, v in media["token_types"].items()},
        **audio)


def runtime_source() -> str:
    return Path(MEDIA_RUNTIME).read_text(encoding="utf-8")


def data_format(processor: Any, forward_params: list[str], form: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The model's chat format (slots) and media facts, frozen into the model facts; None without a template.

    ``form``: how the model's own recipe renders a chat (``hooks.data.records.sample_format``): a template on
    the tokenizer only (a release that keeps it in tokenizer_config.json) is read off the tokenizer, string
    content with the processor's image mark written into it, and compared with that recipe."""
    from hooks.data.chat_format import derive_for

    form = form if (form or {}).get("kind") == "chat" else {}
    owner = processor.tokenizer if form.get("template_on") == "tokenizer" else processor
    from hooks.data.audio import processor_media

    media = ("image", "video", "audio") if "audio" in processor_media(processor) else ("image", "video")
    chat = derive_for(owner, processor.tokenizer, form.get("image_mark", ""), media)
    if chat is None:
        return None
    chat.bos_from_tokenizer = bos_from_tokenizer(processor, form, chat.string_roles)
    chat.whole_text = chat.expressible and slots_tokenize_apart(chat, processor.tokenizer)
    facts: dict[str, Any] = {"chat": chat.to_dict(), "media": None}
    if (chat.image_item or chat.audio_item) and chat.expressible:
        try:
            facts["media"] = media_facts(processor, facts["chat"], forward_params)
            problem = (expansion_problem(processor, facts["chat"], facts["media"], form=form) if chat.image_item
                       else "") or (audio_expansion_problem(processor, facts["chat"], facts["media"], form)
                                    if chat.audio_item else "")
        except Exception as err:  # noqa: BLE001 - the processor cannot expand its own item: branch b cannot either
            kind, item = ("image", chat.image_item) if chat.image_item else ("audio", chat.audio_item)
            problem = (f"the processor does not expand the template's {kind} item {item!r} "
                       f"({type(err).__name__}: {err})")
        if problem:
            facts["chat"]["problems"].append(problem)
    return facts


def bos_from_tokenizer(processor: Any, form: dict[str, Any] | None = None, string_roles: list[str] = ()) -> bool:
    """Whether the model's own tokenization adds a BOS that its chat template does not write.

    ``ProcessorMixin.apply_chat_template(tokenize=True)`` lets the tokenizer add special tokens
    unless the rendered text already starts with the BOS; the data path must then add it too.
    A template on the tokenizer only is rendered, then tokenized as the model's recipe does (``own_inputs``).
    """
    tokenizer = processor.tokenizer
    conversation = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    if (form or {}).get("template_on") == "tokenizer":
        text = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}] if "user" in string_roles
                                             else conversation, tokenize=False)
        ids = own_inputs(processor, [conversation], list(string_roles), form)["input_ids"][0].tolist()
    else:
        text = processor.apply_chat_template(conversation, tokenize=False)
        ids = processor.apply_chat_template(conversation, tokenize=True, return_dict=True,
                                            return_tensors="pt")["input_ids"][0].tolist()
    bos = tokenizer.bos_token_id
    return bool(bos is not None and ids and ids[0] == bos and not text.startswith(tokenizer.bos_token or "\0"))


def own_inputs(processor: Any, conversations: list[list[dict[str, Any]]], string_roles: list[str],
               form: dict[str, Any] | None = None) -> Any:
    """The model's own inputs for ``conversations`` (media inline as ``{"type": "image", "image": PIL}``).

    What ``apply_chat_template(tokenize=True)`` does (render, then the processor; no added special
    tokens when the text starts with the BOS), done in two steps so that roles whose content the
    template reads as a string (GLM-4.1V) get a string while the processor still sees every image.
    ``form`` (branch c's sample format): a chat template on the tokenizer only, and an image mark the
    processor expands, are used as the model card's recipe uses them (Phi-3-vision: each image written
    ``<|image_n|>`` and a newline, the tokenizer's template, then ``processor(prompt, images)``).
    """
    form = form or {}
    if form.get("kind") == "template":  # the processor's own template call, each clip named by its file
        return template_inputs(processor, conversations)
    owner = processor.tokenizer if form.get("template_on") == "tokenizer" else processor
    mark = form.get("image_mark", "")
    texts, images, videos, audios = [], [], [], []  # videos: runtime ``Clip``s (frames and their rate)
    for conversation in conversations:
        rendered, sample_images, sample_videos = [], [], []
        for message in conversation:
            items = message["content"]
            text_only = message["role"] in string_roles and all(i["type"] == "text" for i in items)
            if mark:
                content = "".join(mark.format(n=len(sample_images) + sum(j["type"] == "image" for j in items[:k]) + 1)
                                  + "\n" if i["type"] == "image" else i["text"] for k, i in enumerate(items))
            elif text_only:
                content = "".join(i["text"] for i in items)
            else:
                content = [{"type": i["type"], **({"text": i["text"]} if i["type"] == "text" else {"audio": ""}
                                                  if i["type"] == "audio" else {})} for i in items]
            sample_images += [i["image"] for i in items if i["type"] == "image"]
            sample_videos += [i["video"] for i in items if i["type"] == "video"]
            audios += [i["audio"] for i in items if i["type"] == "audio"]  # a flat list: processors take clips so
            rendered.append({"role": message["role"], "content": content})
        texts.append(owner.apply_chat_template(rendered, tokenize=False))
        images.append(sample_images)
        videos.append(sample_videos)
    clips = {form.get("audio_kwarg") or "audio": audios, **({"sampling_rate": form["sampling_rate"]} if form.get(
        "sampling_rate") else {})} if audios else {}
    if form.get("one_text"):  # the processor takes one string and the images, as its model card calls it
        return processor(texts[0], images[0] or None, return_tensors="pt", **clips)
    bos = processor.tokenizer.bos_token
    kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True,
                              "add_special_tokens": not (bos and texts[0].startswith(bos)), **clips}
    if any(images):
        kwargs["images"] = images
    if any(videos):
        kwargs["videos"] = [[c.frames for c in group] for group in videos]
        kwargs["video_metadata"] = [[c.metadata() for c in group] for group in videos]
    return processor(**kwargs)


def template_inputs(processor: Any, conversations: list[list[dict[str, Any]]]) -> Any:
    """What the model card's call makes of ``conversations`` (branch c's ``template`` convention, Voxtral):
    ``processor.apply_chat_template(conversation, tokenize=True, return_dict=True)``, each clip an audio item naming
    the file it was read from (``{"type": "audio", "path": ...}``), the processor loaded in its training mode."""
    rendered = [[{"role": message["role"], "content": [
        {"type": "audio", "path": str(item["path"])} if item["type"] == "audio" else dict(item)
        for item in message["content"]]} for message in conversation] for conversation in conversations]
    return processor.apply_chat_template(rendered[0] if len(rendered) == 1 else rendered, tokenize=True,
                                         return_dict=True)


def expansion_problem(processor: Any, chat: dict[str, Any], media: dict[str, Any],
                      sizes: tuple[tuple[int, int], ...] = ((96, 48),), form: dict[str, Any] | None = None) -> str:
    """Why the data path's text for one image-first turn (media expanded in place by ``processor_media``)
    does not tokenize to the processor's own ids ("" if it does)."""
    return _in_place_problem(processor, chat, media, "image", [sample_image(size) for size in sizes], "Red.", form)


def audio_expansion_problem(processor: Any, chat: dict[str, Any], media: dict[str, Any],
                            form: dict[str, Any] | None = None) -> str:
    """The same for one audio-first turn, with two clips of different lengths."""
    from hooks.data.sample import demo_audio

    clips = [demo_audio(0)[0], demo_audio(1, seconds=2.5)[0]]
    form = {**(form or {}), "audio_kwarg": media["audio_kwarg"], "sampling_rate": media["sampling_rate"]}
    return _in_place_problem(processor, chat, media, "audio", clips, "Low.", form)


def _in_place_problem(processor: Any, chat: dict[str, Any], media: dict[str, Any], kind: str, items: list[Any],
                      answer: str, form: dict[str, Any] | None) -> str:
    """Why ``items`` (of ``kind``) expanded in place in a first user turn do not tokenize as the processor's own
    rendering of that turn does ("" when they do)."""
    from hooks.data.chat_format import ChatFormat

    fmt = ChatFormat(**chat)
    data = [{"role": "user", "content": f"<{kind}>" * len(items) + "Describe."},
            {"role": "assistant", "content": answer}]
    images, clips = (items, []) if kind == "image" else ([], items)
    expanded = media_runtime().expand_messages(data, processor, images, [], media_format(chat, media), clips)
    text = fmt.render_contents(None, [m["content"] for m in expanded])
    tokenizer = processor.tokenizer
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = [tokenizer.bos_token_id, *ids] if fmt.bos_from_tokenizer else ids
    turns = [{"role": "user", "content": [*({"type": kind, kind: item} for item in items),
                                          {"type": "text", "text": "Describe."}]},
             {"role": "assistant", "content": [{"type": "text", "text": answer}]}]
    own = own_inputs(processor, [turns], fmt.string_roles, form)["input_ids"][0].tolist()
    if ids == own:
        return ""
    at = first_difference(ids, own)
    return (f"the processor's expansion of {'an image' if kind == 'image' else 'a clip'} depends on where it stands "
            f"in the conversation (first difference at token {at}: {tokenizer.decode(ids[at:at + 3])!r} vs "
            f"{tokenizer.decode(own[at:at + 3])!r})")


def slots_tokenize_apart(fmt: Any, tokenizer: Any) -> bool:
    """Whether encoding each slot on its own (MindSpeed-MM's ``Template``) tokenizes a conversation
    differently from the whole text (the model's own tokenization)."""
    for system, contents in ((None, ["What color is this?", "It is red."]),
                             ("Answer briefly.", ["What color?", "Red.", "And the square?", "Blue."])):
        slots = fmt.slots(system, [fmt.text_lead + c if i % 2 == 0 else c for i, c in enumerate(contents)])
        apart = [i for slot in slots for i in tokenizer(slot, add_special_tokens=False)["input_ids"]]
        if apart != tokenizer("".join(slots), add_special_tokens=False)["input_ids"]:
            return True
    return False
