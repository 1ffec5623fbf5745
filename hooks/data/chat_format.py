"""Derive a MindSpeed-MM chat template (slots) from the model's own chat template.

MindSpeed-MM's ``Template`` encodes a conversation as ``prefix`` (first turn only), an optional
``system`` slot, then for every turn a ``user`` slot (which carries the assistant header, so the
prompt side ends where the answer starts) and an ``assistant`` slot (the answer and what closes it).
Only the assistant slots are trained. This module finds those slots by rendering the model's own
chat template on sentinel conversations (no system / system / two turns / an image first) and
reading off the text around the sentinels, instead of keeping a table of chat formats: the same
steps read next month's templates.

Rules, each with its reason:

- Slots come from complete conversations (a user turn *and* its answer), not from the generation
  prompt: training text is a finished conversation, and some templates write a fixed block before
  past answers only (GLM-4.5V's empty ``<think></think>``). Such a block goes to the prompt side
  (the user slot) so the text is the model's own while the block is not trained; it is reported.
  Whitespace there (``ASSISTANT: answer``) is the model's own first output: it opens the answer slot.
- The second turn must render as the first did, and a later turn must not change an earlier one;
  otherwise the format is not slots (it depends on the turn index) and is reported as a problem.
- The system prompt is either a turn of its own (its wrapper is read off) or written inside the
  first user turn (Gemma): then the template needs the ``system_in_first_user`` form. A prompt the
  template writes when no system message is given is the ``default_system``.
- The prefix holds what only the first turn carries besides the system prompt (``[gMASK]<sop>``,
  a BOS the template writes); a BOS that only the tokenizer adds is ``bos_from_tokenizer``.
- A user turn whose content starts with text may get extra text before it that an image-first turn
  does not (Idefics3's ``User: `` vs ``User:<image>``): that is the ``text_lead``, added to the
  content by the data path, so the user slot itself stays fixed.
- ``image_item``/``video_item`` are what the template writes for one media item; the processor
  later expands them (``partials/processor_media.py``). Two images must render as two items.
- MindSpeed-MM tokenizes each slot on its own. Where the model's tokenizer merges text across a slot
  boundary (a space before ``USER:`` joins the next word), a conversation is tokenized as a whole and
  split at the slot boundaries instead (``whole_text``, set by ``hooks.data.media``).
- The end-of-turn tokens are the special tokens right after an answer; what follows them up to the
  next turn (a newline) is the separator. Both stay in the assistant slot, as in
  MindSpeed-MM's own templates, and parity accepts a trained separator. A template that writes no
  special token after an answer gets ``end_of_turn == ""`` and a warning: the model learns no stop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hooks.model.processor_facts import ChatSlots

U1, A1, U2, A2, SYS = "Quixotic-user-1", "Zephyr-answer-1", "Quixotic-user-2", "Zephyr-answer-2", "Jovial-system"

Message = dict[str, Any]
Render = Callable[[list[Message], bool], str]  # (messages, add_generation_prompt) -> text


@dataclass
class ChatFormat(ChatSlots):
    """The model's chat format as MindSpeed-MM template slots (``ChatSlots``: the fields, as the facts freeze them),
    with the rendering the text comparison and the derived template use."""

    # --- rendering with the slots (the derived side of the text comparison) ----------------------

    def render(self, conversation: list[Message]) -> str:
        """The text MindSpeed-MM's Template builds from these slots (before tokenization)."""
        system, turns = _split_system(conversation)
        return self.render_contents(system, [self.user_content(m) if m["role"] == "user" else text_of(m)
                                             for m in turns])

    def render_contents(self, system: str | None, contents: list[str]) -> str:
        """Slots around final contents (user, answer, user, answer, ...): media expanded, leads added."""
        return "".join(self.slots(system, contents))

    def slots(self, system: str | None, contents: list[str]) -> list[str]:
        """The texts MindSpeed-MM's Template encodes one by one: prefix, system, then user and answer slots."""
        system = system if system is not None else self.default_system
        out = [self.prefix]
        if system and self.system_in_first_user is None:
            out.append(self.system_pre + system + self.system_post)
        for index in range(0, len(contents), 2):
            content = contents[index]
            if index == 0 and system and self.system_in_first_user is not None:
                content = system + self.system_in_first_user + content
            out.append(self.user_pre + content + self.user_post)
            if index + 1 < len(contents):
                out.append(self.assistant_pre + contents[index + 1] + self.assistant_post)
        return [slot for slot in out if slot]

    def user_content(self, message: Message) -> str:
        """A user turn's content as the data path writes it: media items in place, text lead for text-first."""
        items = message["content"] if isinstance(message["content"], list) else [
            {"type": "text", "text": message["content"]}]
        parts = []
        for item in items:
            if item["type"] == "text":
                parts.append(item["text"])
            else:
                parts.append(getattr(self, f"{item['type']}_item"))
        lead = "" if items and items[0]["type"] in self.no_lead_after else self.text_lead
        return lead + "".join(p or "" for p in parts)


def text_of(message: Message) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(i.get("text", "") for i in content if i["type"] == "text")


def _split_system(conversation: list[Message]) -> tuple[str | None, list[Message]]:
    if conversation and conversation[0]["role"] == "system":
        return text_of(conversation[0]), conversation[1:]
    return None, conversation


# --- sentinel conversations --------------------------------------------------------------------------


def _message(role: str, items: list[dict[str, Any]], string_roles: list[str]) -> Message:
    if role in string_roles and all(i["type"] == "text" for i in items):
        return {"role": role, "content": "".join(i["text"] for i in items)}
    return {"role": role, "content": items}


def _text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


class _Sentinels:
    """Builds the sentinel conversations in the content form the template reads for each role."""

    def __init__(self, render: Render, string_roles: list[str]) -> None:
        self.render, self.string_roles = render, string_roles

    def conv(self, *turns: tuple[str, list[dict[str, Any]]]) -> list[Message]:
        return [_message(role, items, self.string_roles) for role, items in turns]

    def text(self, *turns: tuple[str, list[dict[str, Any]]], generation: bool = False) -> str:
        return self.render(self.conv(*turns), generation)


def _reads_list(render: Render, conv: list[Message], sentinel: str) -> bool:
    """Whether the template writes ``sentinel`` from typed (list) content, neither failing nor printing a repr."""
    try:
        rendered = render(conv, False)
    except Exception:  # noqa: BLE001 - some templates reject list content for a role: use strings
        return False
    return sentinel in rendered and f"'text': '{sentinel}'" not in rendered


def content_forms(render: Render) -> list[str]:
    """Roles whose content the template renders verbatim only as a plain string (GLM-4.1V's assistant; every
    role of a template written for string content, as Phi-3's and InternVL2's tokenizer templates are)."""
    string_roles = []
    user: Message = {"role": "user", "content": _text(U1)}
    if not _reads_list(render, [user], U1):
        string_roles.append("user")
        user = {"role": "user", "content": U1}
    for role, sentinel in (("assistant", A1), ("system", SYS)):
        conv = [user, {"role": role, "content": _text(sentinel)}] if role == "assistant" else [
            {"role": role, "content": _text(sentinel)}, user]
        if not _reads_list(render, conv, sentinel):
            string_roles.append(role)
    return string_roles


def derive(render: Render, *, bos_token: str | None = None, special_tokens: list[str] | None = None,
           media: tuple[str, ...] = ("image", "video", "audio")) -> ChatFormat:
    """Read the slots off the model's chat template; problems say why a format is not slots."""
    fmt = ChatFormat()
    try:
        fmt.string_roles = content_forms(render)
        s = _Sentinels(render, fmt.string_roles)
        one = s.text(("user", _text(U1)), ("assistant", _text(A1)))
        two = s.text(("user", _text(U1)), ("assistant", _text(A1)), ("user", _text(U2)), ("assistant", _text(A2)))
        with_system = s.text(("system", _text(SYS)), ("user", _text(U1)), ("assistant", _text(A1)))
        generation = s.text(("user", _text(U1)), generation=True)
    except Exception as err:  # noqa: BLE001 - a template that cannot render a plain chat is not slots
        fmt.problems.append(f"the chat template does not render a plain user/assistant chat ({type(err).__name__}: "
                            f"{err})")
        return fmt
    if not _turns(fmt, one, two):
        return fmt
    _generation(fmt, one, generation)
    _system(fmt, one, with_system, bos_token)
    _end_of_turn(fmt, special_tokens or [])
    for kind in media:
        _media(fmt, s, kind)
    return fmt


def _turns(fmt: ChatFormat, one: str, two: str) -> bool:
    """User and assistant slots from one and two complete turns."""
    for sentinel, text in ((U1, one), (A1, one), (U2, two), (A2, two)):
        if text.count(sentinel) != 1:
            fmt.problems.append(f"the chat template does not write a message's text once and verbatim ({sentinel!r} "
                                f"appears {text.count(sentinel)} times)")
            return False
    user_at, answer_at = one.index(U1), one.index(A1)
    fmt.user_post = one[user_at + len(U1):answer_at]
    fmt.assistant_post = one[answer_at + len(A1):]
    if not two.startswith(one):
        fmt.problems.append("a second turn changes how the first turn is rendered (the format depends on the "
                            "conversation's length): not expressible as slots")
        return False
    rest = two[len(one):]
    fmt.user_pre = rest[:rest.index(U2)]
    if rest[rest.index(U2) + len(U2):] != fmt.user_post + A2 + fmt.assistant_post:
        fmt.problems.append("the second turn is rendered differently from the first: not expressible as slots")
        return False
    head = one[:user_at]
    if not head.endswith(fmt.user_pre):
        fmt.problems.append(f"the first user turn does not start like the later ones ({head!r} vs "
                            f"{fmt.user_pre!r}): not expressible as slots")
        return False
    fmt.prefix = head[:len(head) - len(fmt.user_pre)]  # prefix and default system, split in _system
    return True


def _generation(fmt: ChatFormat, one: str, generation: str) -> None:
    """Text the template writes before past answers but not in its generation prompt.

    Whitespace there (LLaVA's ``ASSISTANT: answer``) is what the model generates first: it goes to the
    assistant slot, where the tokenizer merges it into the answer's first token as the model's own
    tokenization does. A fixed block (GLM-4.5V's ``<think></think>``) stays on the prompt side.
    """
    prompt = one[:one.index(U1) + len(U1)] + fmt.user_post
    if generation == prompt or not prompt.startswith(generation):
        return
    lead = prompt[len(generation):]
    if not lead.strip():
        fmt.assistant_pre, fmt.user_post = lead, fmt.user_post[:len(fmt.user_post) - len(lead)]
        return
    fmt.history_lead = lead
    fmt.notes.append(f"the chat template writes {lead!r} before every past answer but not in its generation "
                     "prompt: it is kept on the prompt side (not trained)")


def _system(fmt: ChatFormat, one: str, with_system: str, bos_token: str | None) -> None:
    """System wrapper and default system prompt; ``fmt.prefix`` holds prefix + default system on entry."""
    if with_system.count(SYS) != 1 or U1 not in with_system:
        fmt.problems.append("the chat template drops or repeats the system message: system prompts cannot be trained "
                            "with slots")
        return
    if not with_system.endswith(fmt.user_post + fmt.assistant_pre + A1 + fmt.assistant_post):
        fmt.problems.append("a system message changes how the answer is rendered: not expressible as slots")
        return
    head = fmt.prefix  # before the first user turn's opening, without a system message
    before, after = with_system[:with_system.index(SYS)], with_system[with_system.index(SYS) + len(SYS):]
    between = after[:after.index(U1)]
    cut = len(fmt.user_pre)
    if fmt.user_pre and before.endswith(fmt.user_pre) and not between.endswith(fmt.user_pre):
        # The system prompt sits inside the first user turn (Gemma): user_pre + system + separator + content.
        fmt.system_in_first_user, fmt.prefix = between, before[:len(before) - cut]
        if head != fmt.prefix:
            fmt.problems.append("a default system prompt inside the first user turn is not supported")
        return
    if not between.endswith(fmt.user_pre):
        fmt.problems.append(f"the text between the system prompt and the first user turn ({between!r}) does not end "
                            "with the user turn's opening: not expressible as slots")
        return
    fmt.system_post = between[:len(between) - cut]
    if len(head) > len(before) and head.startswith(before) and head.endswith(fmt.system_post):
        fmt.default_system = head[len(before):len(head) - len(fmt.system_post)]
        fmt.prefix = bos_token if bos_token and before.startswith(bos_token) else ""
    elif before.startswith(head):
        fmt.prefix = head
    else:
        fmt.problems.append(f"the text before a system prompt ({before!r}) does not start with the first turn's prefix "
                            f"({head!r}): not expressible as slots")
        return
    fmt.system_pre = before[len(fmt.prefix):]


def closing_tokens(post: str, special_tokens: list[str]) -> list[str]:
    """The special tokens ``post`` (the text a template writes after an answer) starts with, in order."""
    closing: list[str] = []
    ordered = sorted((t for t in special_tokens if t), key=len, reverse=True)
    while token := next((t for t in ordered if post.startswith("".join(closing) + t)), None):
        closing.append(token)
    return closing


def _end_of_turn(fmt: ChatFormat, special_tokens: list[str]) -> None:
    """The special tokens right after an answer (Cohere's ``<|END_RESPONSE|><|END_OF_TURN_TOKEN|>``)."""
    post = fmt.assistant_post
    tokens = closing_tokens(post, special_tokens)
    fmt.stop_word = fmt.stop_word or (tokens[0] if tokens else "")
    closing = fmt.end_of_turn = "".join(tokens)
    if not closing:
        fmt.notes.append(f"the chat template writes no special token after an answer ({post!r}): the model is not "
                         "trained to stop; generation must stop on the next turn's header or a length limit")


def _media(fmt: ChatFormat, s: _Sentinels, kind: str) -> None:
    """What the template writes for one media item at the start of a user turn, and the text lead.

    Images are required for slots; a video format that does not fit is only noted (``video_item``
    stays None and the data path refuses videos), since most data is image-only.
    """
    item = {"type": kind, "audio": ""} if kind == "audio" else {"type": kind}  # ``'audio' in item``: Qwen2-Audio
    try:
        media_first = s.text(("user", [item, *_text(U1)]), ("assistant", _text(A1)))
        twice = s.text(("user", [item, item, *_text(U1)]), ("assistant", _text(A1)))
    except Exception:  # noqa: BLE001 - the template (or model) has no such media
        return
    text_first = s.text(("user", _text(U1)), ("assistant", _text(A1)))
    common = 0
    while common < min(len(media_first), len(text_first)) and media_first[common] == text_first[common]:
        common += 1
    if U1 not in media_first[common:]:
        return
    written = media_first[common:media_first.index(U1)]
    lead = text_first[common:text_first.index(U1)]
    if not written or written == lead:
        return  # the template ignores this media type
    problem = ""
    if lead and not (fmt.user_pre + fmt.text_lead).endswith(lead):
        problem = (f"a text-first user turn gets {lead!r} that a {kind}-first turn does not, and it is not at the end "
                   "of the turn's opening")
    elif lead and fmt.text_lead and lead != fmt.text_lead:
        problem = "image-first and video-first user turns start differently"
    elif twice[common:twice.index(U1)] != written * 2:
        problem = f"two {kind}s are not written as two items: the template numbers or groups them"
    if problem:
        (fmt.problems if kind == "image" else fmt.notes).append(
            f"{problem}: {kind}s are not expressible as slots" + ("" if kind == "image" else " and are refused"))
        return
    if lead:
        if not fmt.text_lead:
            fmt.text_lead = lead
            fmt.user_pre = fmt.user_pre[:len(fmt.user_pre) - len(lead)]
        fmt.no_lead_after.append(kind)
    setattr(fmt, f"{kind}_item", written)


def derive_for(owner: Any, tokenizer: Any = None, image_mark: str = "",
               media: tuple[str, ...] = ("image", "video")) -> ChatFormat | None:
    """``derive`` on a processor's (or its tokenizer's) own chat template; None when it has none.

    ``image_mark``: a template that reads string content writes no image item itself; the model's own
    recipe writes the processor's mark into the text (``hooks.data.records.sample_format``), so that mark
    and its newline are the item, as long as it is one fixed text (Phi-3-vision numbers its marks).
    """
    if not getattr(owner, "chat_template", None):
        return None
    tokenizer = tokenizer or getattr(owner, "tokenizer", owner)
    special = [*tokenizer.all_special_tokens, *tokenizer.get_added_vocab()]

    def render(messages: list[Message], generation: bool) -> str:
        return owner.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)

    fmt = derive(render, bos_token=tokenizer.bos_token, special_tokens=special, media=media)
    if "user" in fmt.string_roles and fmt.expressible:
        if not image_mark:
            fmt.problems.append("the chat template reads string content only and the processor has no image mark "
                                "to write into it")
        elif "{n}" in image_mark:
            marks = ", ".join(repr(image_mark.format(n=n)) for n in (1, 2))
            fmt.problems.append(f"the chat template reads string content only and the processor's image marks are "
                                f"numbered ({marks}, ...), which one template slot cannot write")
        else:
            fmt.image_item = image_mark.format() + "\n"  # as records.as_template_reads writes it
    return fmt
