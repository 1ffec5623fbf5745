"""The data path's facts, read off the model's own processor and code while the probe has it built.

What the model facts (``hooks.model.facts``) do not say and the data branch depends on: the processor's
class, the keys it emits for one image and a text, the sample format it makes (``hooks.data.records``),
the chat format read off its template (``hooks.data.media``); for a release without a processor class,
the model's own data code run on the weightless build (``chat()``, a sample method, ``make_context()``:
``hooks.data.model_code``, ``model_method``, ``model_context``). The branch to default to is chosen from
these facts by ``hooks.data.candidates.recommend`` (without a checkout), or by the data-branch question's
evidence (``hooks.render.evidence``); it is never part of the model facts.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from hooks.data.resolution import guessed, names_processor
from hooks.model.build import ProbeError
from hooks.model.facts import Probed
from hooks.model.processor_facts import ProcessorFacts


def processor_facts(model_dir: Path, *, trust_remote_code: bool, forward_params: list[str] | None = None,
                    custom: bool = False) -> dict[str, Any]:
    """Processor class, the keys it emits for one image + text, and the chat/media format read off it.

    Best effort: a processor that cannot be loaded is reported (``error``), never fatal here.
    """
    facts: dict[str, Any] = {}
    try:
        from hooks.compat import ensure_torchvision

        ensure_torchvision()
        from transformers import AutoProcessor

        try:
            if custom:  # AutoProcessor reads config.json's model_type too; the tokenizer stands alone
                from transformers import AutoTokenizer

                proc = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
            else:
                proc = AutoProcessor.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
        except Exception as err:  # noqa: BLE001 - the data path cannot start without it: the copy stops on this
            if not custom and not names_processor(model_dir):  # a guess from a borrowed class name: no processor
                return {"missing": True, "error": guessed(model_dir, _config_class(model_dir, trust_remote_code),
                                                          cause_of(err))}
            facts["unloadable"] = True
            facts["error"] = cause_of(err)
            raise
        if (not custom and type(proc).__module__.startswith("transformers.") and not names_processor(model_dir)
                and not _is_tokenizer(proc)):  # loaded, but a built-in class the release never named
            return {"missing": True, "error": guessed(model_dir, _config_class(model_dir, trust_remote_code),
                                                      f"it loads {type(proc).__name__}")}
        facts.update({"class": type(proc).__name__, "image_token": getattr(proc, "image_token", None),
                      "has_chat_template": bool(getattr(proc, "chat_template", None))})
        from transformers import PreTrainedTokenizerBase

        # QWenTokenizer has a .tokenizer too (its tiktoken encoding): it is not a processor
        if hasattr(proc, "tokenizer") and not isinstance(proc, PreTrainedTokenizerBase):
            from hooks.data.model_recipe import entry_method
            from hooks.data.records import one_image_call, sample_format

            if method := entry_method(proc):  # its own call makes a sample, not __call__ (_entry_facts runs it)
                facts["entry_method"] = method
                return facts

            facts["sample_format"] = sample_format(proc, model_dir)  # branch c: how the processor makes a sample
        else:  # AutoProcessor fell back to the tokenizer alone
            facts["missing"] = True
            facts["error"] = (f"no processor class: AutoProcessor gives the tokenizer ({type(proc).__name__}); "
                              "image preprocessing and the chat format live in the model's own code")
            return facts
        from hooks.data.audio import audio_facts, measure, processor_media, with_audio
        from hooks.data.records import one_audio_call

        audio = audio_facts(proc, forward_params or [])
        form = with_audio(facts["sample_format"], proc, audio)
        facts["unevaluated"] = True  # until the processor has made one image (or clip) + text sample
        clip_out = None
        if audio is not None:
            facts["media"] = processor_media(proc)  # absent: images only
            facts["audio"] = audio.to_dict()  # facts of an audio model that failed on its clip say so
            if form["kind"] not in ("chat", "template"):
                audio.problems.append(f"branch c's {form['kind']!r} convention hands the processor no audio")
            else:
                clip_out = one_audio_call(proc, form, model_dir)
                measure(audio, clip_out, forward_params or [])
                form["audio_keys"] = audio.batch_keys
            facts["audio"] = audio.to_dict()
        # One sample's outputs: an image's, or for an audio-only model its clip's (the one measured above, not made
        # twice: for the template convention it loads the processor again in its training mode)
        if "image" in facts.get("media", ["image"]):
            out = one_image_call(proc, form)
        else:
            out = clip_out if clip_out is not None else one_audio_call(proc, form, model_dir)
        del facts["unevaluated"]
        facts["output_keys"] = sorted(out.keys())
        facts["one_image_tokens"] = int(out["input_ids"].shape[-1])  # sizes the YAML's cutoff_len
        from hooks.data.media import data_format

        facts["data_format"] = data_format(proc, forward_params or [], facts["sample_format"])
    except Exception as err:  # noqa: BLE001 - reported, never fatal: the smoke will exercise it for real
        facts.setdefault("error", cause_of(err))
    return facts


def _prompt_builder(spec: str) -> bool:
    """The answer names a prompt builder (``hooks.data.prompt_builder``), not an image function for chat()."""
    from hooks.data.builder import load_builder
    from hooks.data.prompt_builder import is_prompt_builder

    try:
        return is_prompt_builder(load_builder(spec))
    except Exception:  # noqa: BLE001 - the image-function path reports the file's own error
        return False


def _config_class(model_dir: Path, trust_remote_code: bool) -> str:
    """The name of the release's config class (what AutoProcessor resolves by), or "?" when it does not load."""
    try:
        from transformers import AutoConfig

        return type(AutoConfig.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)).__name__
    except Exception:  # noqa: BLE001 - only named in a message
        return "?"


def _is_tokenizer(proc: object) -> bool:
    from transformers import PreTrainedTokenizerBase

    return isinstance(proc, PreTrainedTokenizerBase)


def cause_of(err: BaseException) -> str:
    """``Type: message`` of ``err`` and, where transformers wraps the real failure (a processor class that does not
    import: "Could not import module 'X'. Are this object's requirements defined correctly?"), of the exception
    it was raised from: the missing package or the failing import is what the user must fix."""
    text = f"{type(err).__name__}: {str(err).strip() or '(no message)'}"
    inner = err.__cause__ or err.__context__
    seen = {id(err)}
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        text += f"; caused by {type(inner).__name__}: {str(inner).strip() or '(no message)'}"
        inner = inner.__cause__ or inner.__context__
    return text


def add_data_facts(probed: Probed, model_dir: Path, *, trust_remote_code: bool, sample_builder: str = "") -> None:
    """The processor's facts and, for a release without a processor class, its own data code's, into
    ``probed.facts.processor``; raises ``ProbeError`` when the processor does not load at all.

    ``sample_builder``: the user's image function (``hooks.data.builder``) for a release whose ``chat()`` takes
    tiles it ships no code to make; only the code convention uses it, and its verdict stands alone."""
    facts = probed.facts
    found = processor_facts(model_dir, trust_remote_code=trust_remote_code, forward_params=facts.forward_params,
                            custom=facts.custom_model)
    try:
        _add_own_code_facts(found, probed, model_dir, trust_remote_code=trust_remote_code,
                            sample_builder=sample_builder)
    finally:
        facts.processor = ProcessorFacts.from_dict(found)


def _add_own_code_facts(found: dict[str, Any], probed: Probed, model_dir: Path, *, trust_remote_code: bool,
                        sample_builder: str) -> None:
    """For a processor that does not load, the copy's stop; for a release without one, what its own data code does
    (each convention's module reports a partial mapping, merged into ``found`` in the order they are tried)."""
    facts, model = probed.facts, probed.model
    if found.get("unloadable"):
        cause = found["error"]
        if "ModuleNotFoundError" in cause or "ImportError" in cause:  # its code needs a package this python lacks
            import sys

            raise ProbeError(f"python: the model's processor does not import in {sys.executable} ({cause[-400:]}); "
                             "install the package it names in the training environment, or answer an interpreter "
                             "that has it")
        raise ProbeError(f"model_path: the model's processor does not load from {model_dir} "
                         f"({cause[:300]}); the data path needs it: copy the processor and "
                         "tokenizer files (preprocessor_config.json, processor_config.json, tokenizer_config.json, "
                         "chat template) from the model's release")
    if found.get("entry_method") and facts.remote_code:  # the processor's own call is the recipe
        _entry_facts(found, probed, model_dir, trust_remote_code)
        return
    if found.get("missing") and facts.remote_code:  # the model's own data code, run on ``model``
        from hooks.data.model_code import code_facts
        from hooks.data.model_context import context_facts
        from hooks.data.model_method import method_facts
        from hooks.data.model_recipe import recipe_facts

        cls = type(model)
        if sample_builder and _prompt_builder(sample_builder):  # the user's whole inference prompt
            found.update(recipe_facts(cls, model_dir, facts.forward_params, trust_remote_code, sample_builder))
            return
        try:
            found.update(code_facts(cls, model, model_dir, trust_remote_code, sample_builder))
            if found.get("problems") and not sample_builder:  # no chat(): a method writing samples?
                found.update(method_facts(cls, model, model_dir, facts.forward_params, trust_remote_code))
            if found.get("problems") and not sample_builder:  # or image paths in make_context()?
                found.update(context_facts(cls, model, model_dir, trust_remote_code))
            if found.get("problems") and not sample_builder:  # or the model card's quick-start?
                found.update(recipe_facts(cls, model_dir, facts.forward_params, trust_remote_code))
            if found.get("problems") and not sample_builder and not found.get("needs_builder"):
                found.update(needs_builder=True, builder_contract="prompt")  # nothing builds a sample
        except Exception as err:  # noqa: BLE001 - could not evaluate the model's data code: never evidence
            found["problems"] = [f"could not evaluate the model's own data code ({type(err).__name__}: "
                                 f"{str(err)[:300]})"]
            found["traceback"] = traceback.format_exc()[-3000:]


def _entry_facts(found: dict[str, Any], probed: Probed, model_dir: Path, trust_remote_code: bool) -> None:
    """The ``recipe`` convention with the processor's own entry method (Molmo's ``process``) and the model's batch
    generation as the recipe (``hooks.data.model_recipe``); a call that fails leaves the processor unevaluated,
    so the copy stops naming why."""
    from transformers import AutoProcessor

    from hooks.data.model_recipe import recipe_facts

    facts = probed.facts
    try:
        processor = AutoProcessor.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
        found.update(recipe_facts(type(probed.model), model_dir, facts.forward_params, trust_remote_code,
                                  processor=processor))
    except Exception as err:  # noqa: BLE001 - could not evaluate the processor's own call: never evidence
        found["problems"] = [f"could not evaluate the processor's own {found['entry_method']}() "
                             f"({type(err).__name__}: {str(err)[:300]})"]
        found["traceback"] = traceback.format_exc()[-3000:]
    if found.get("problems"):
        found.update(unevaluated=True, error="; ".join(found["problems"]))
