"""Whole-batch data parity, run inside the framework's environment (it imports ``mindspeed_mm``).

For the sample conversations of ``hooks.data.parity_samples`` it builds the batch MindSpeed-MM's trainer would
build (``hooks.data.framework_batches``: the real ``huggingface`` dataset builder and the registered collator
configured by a YAML ``data`` section, the YAML's plugins imported as the trainer imports them) and the batch the
model's own chat template and processor build for the same conversations. Then it compares what reaches ``forward``:

- ``input_ids`` and ``attention_mask``, token by token (the collator's padding aside);
- the label mask: the answer and its end-of-turn token trained, nothing of the prompt, system,
  media or role headers; whitespace after the end-of-turn token may be trained (MindSpeed-MM's
  template keeps a turn's closing text in the assistant slot);
- every processor output that ``forward`` takes (pixel values within tolerance, image sizes,
  grids, masks, token types) present and equal, and no batch key that ``forward`` does not take;
- a text-only sample still carries a stand-in image, fully masked, so that every rank runs the
  vision tower.

``python -m hooks.data.batch --config CONFIG.yaml --model-dir DIR --spec SPEC.json --out RESULT.json``
(the caller provides ``hooks.framework.environment.framework_env``, cwd = the MindSpeed-MM root).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from hooks.data import IGNORE_INDEX, MODEL_CODE_KINDS, first_difference, value_difference
from hooks.data.batch_spec import BatchSpec
from hooks.data.framework_batches import (
    environment_cause,
    framework_import_error,
    meta_model,
    mindspeed_batches,
    plugin_batches,
)
from hooks.data.parity_samples import (
    AUDIO_SAMPLES,
    OMNI_SAMPLE,
    SAMPLES,
    VIDEO,
    cases,
    own_conversation,
    video_clip,
    write_samples,
)

# --- comparison ---------------------------------------------------------------------------------


def _char_starts(tokenizer: Any, ids: list[int]) -> list[int]:
    """Where each token's text starts in ``decode(ids)`` (cumulative decoding keeps every piece's context)."""
    starts, text = [], ""
    for end in range(len(ids)):
        starts.append(len(text))
        text = tokenizer.decode(ids[:end + 1], skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return [*starts, len(text)]


def own_trained(tokenizer: Any, ids: list[int], answers: list[str], end_of_turn: str) -> list[bool]:
    """Tokens the model's own format trains: each answer's text and the end-of-turn token right after it."""
    text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    starts, spans, cursor = _char_starts(tokenizer, ids), [], 0
    closing = [tokenizer.decode([t], skip_special_tokens=False)
               for t in tokenizer(end_of_turn, add_special_tokens=False)["input_ids"]] if end_of_turn else []
    for answer in answers:
        begin = text.find(answer, cursor)
        if begin < 0:
            raise ValueError(f"answer {answer!r} not found in the model's own text")
        end = begin + len(answer)
        # The end of turn as far as the text writes it there: Phi-4's template closes every answer with <|end|> and
        # the conversation's last with <|end|><|endoftext|>; each closing token the model's format writes is trained.
        for piece in closing:
            if not text.startswith(piece, end):
                break
            end += len(piece)
        spans.append((begin, end))
        cursor = end
    return [any(starts[i] < e and starts[i + 1] > b for b, e in spans) or (starts[i] == starts[i + 1] and any(
        b <= starts[i] < e for b, e in spans)) for i in range(len(ids))]


def _rows(batch: Any, key: str) -> list[list[Any]]:
    value = batch[key]
    return value.tolist() if hasattr(value, "tolist") else [list(v) for v in value]


def compare_sample(name: str, ours: dict[str, Any], own: Any, tokenizer: Any, answers: list[str],
                   end_of_turn: str, forward_keys: set[str], forward_kwargs: bool) -> tuple[str, list[str]]:
    """(verdict, findings) for one sample: "match" or "mismatch" with the first difference in words."""
    mask = _rows(ours, "attention_mask")[0]
    length = sum(1 for m in mask if m)
    ids, labels = _rows(ours, "input_ids")[0][:length], _rows(ours, "labels")[0][:length]
    own_mask = _rows(own, "attention_mask")[0]
    own_ids = [t for t, m in zip(_rows(own, "input_ids")[0], own_mask, strict=True) if m]
    show = lambda seq, at: tokenizer.decode(seq[max(at - 3, 0):at + 4], skip_special_tokens=False)  # noqa: E731
    if ids != own_ids:
        at = first_difference(ids, own_ids)
        return "mismatch", [f"{name}: input_ids differ at token {at} of {len(own_ids)}: MindSpeed-MM writes "
                            f"{show(ids, at)!r} where the model's own template and processor write "
                            f"{show(own_ids, at)!r}"]
    if any(m != 1 for m in mask[:length]) or any(mask[length:]):
        return "mismatch", [f"{name}: attention_mask is not 1 over the sample and 0 over the padding"]
    findings = []
    # Phi-3-vision's processor writes each image's positions as negative ids (minus the image's number), which
    # no tokenizer decodes: read as the unknown token, they stay one untrained placeholder token each.
    placeholder = tokenizer.unk_token_id if tokenizer.unk_token_id is not None else 0
    ids = own_ids = [t if t >= 0 else placeholder for t in own_ids]
    trained = own_trained(tokenizer, own_ids, answers, end_of_turn)
    for i, (token, label, want) in enumerate(zip(ids, labels, trained, strict=True)):
        if want and label != token:
            return "mismatch", [f"{name}: token {i} ({show(ids, i)!r}) is part of an answer or its end-of-turn "
                                "token but is not trained"]
        if label != IGNORE_INDEX and not want:
            piece = tokenizer.decode([token], skip_special_tokens=False)
            if piece.strip():
                return "mismatch", [f"{name}: token {i} ({piece!r}) is trained but is prompt, system, media or "
                                    "template text in the model's format"]
            findings.append(f"{name}: also trains the whitespace {piece!r} between turns (MindSpeed-MM keeps it in "
                            "the answer's slot)")
    for key in own.keys():
        if key in ("input_ids", "attention_mask") or key not in forward_keys:
            continue
        if key not in ours:
            return "mismatch", [f"{name}: the batch lacks {key!r}, which the model's processor gives and forward takes"]
        if key in ("token_type_ids", "cross_attention_mask"):
            own_rows = [v for v, m in zip(_rows(own, key)[0], own_mask, strict=True) if m]
            difference = value_difference(_rows(ours, key)[0][:length], own_rows)
        else:
            difference = value_difference(ours[key], own[key])
        if difference:
            return "mismatch", [f"{name}: {key!r} differs from the model's processor's ({difference})"]
    extra = [k for k in ours if k not in ("input_ids", "attention_mask", "labels") and k not in own.keys()]
    stray = [k for k in extra if k not in forward_keys]
    if stray and not forward_kwargs:
        return "mismatch", [f"{name}: the batch carries {stray}, which forward does not take"]
    if extra:
        findings.append(f"{name}: also passes {sorted(extra)} (forward takes them"
                        + (f"; {sorted(stray)} through **kwargs)" if stray else ")"))
    return "match", findings


def text_only_check(batch: dict[str, Any], sample_length: int, takes_images: bool,
                    audio_keys: list[str] | None = None) -> tuple[str, list[str]]:
    """A text-only sample must still run every tower (a stand-in image; a stand-in clip for a model that takes
    audio: ``audio_keys``, its audio inputs), with the stand-ins masked."""
    stand_ins = ([("image", ["pixel_values"])] if takes_images else []) + ([("clip", audio_keys)] if audio_keys else [])
    if not stand_ins:
        return "match", []
    for what, keys in stand_ins:
        if not all(key in batch for key in keys):
            tower = "vision" if what == "image" else "audio"
            return "mismatch", [f"text only: the batch has no stand-in {what}: on FSDP a rank without "
                                f"{what}s would skip the {tower} tower and hang the others"]
    mask, labels = _rows(batch, "attention_mask")[0], _rows(batch, "labels")[0]
    names = " and ".join(what for what, _ in stand_ins)
    if sum(1 for m in mask if m) != sample_length or any(lab != IGNORE_INDEX for lab in labels[sample_length:]):
        return "mismatch", [f"text only: the stand-in {names}'s tokens are attended to or trained"]
    return "match", [f"text only: a stand-in {names} {'is' if len(stand_ins) == 1 else 'are'} added, not attended "
                     "to and not trained"]


def _could_not(name: str, err: Exception) -> dict[str, Any]:
    """A candidate whose data path raises could not be evaluated: its cause, never a difference."""
    return {"verdict": "error", "environment": environment_cause(err), "data_path_raises": True,
            "details": [f"{name}: could not evaluate: MindSpeed-MM's data path raises on it ({type(err).__name__}: "
                        f"{err})"]}


def _processor_choice(model_dir: Path, trust: bool, processor: Any, use_fast: bool) -> str:
    """Which image processor both sides use, and whether the model's default differs (pixels then may too)."""
    from transformers import AutoProcessor

    if getattr(processor, "image_processor", None) is None:  # an audio-only processor: its clips, both sides
        return f"processor {type(processor).__name__} on both sides"
    chosen = type(getattr(processor, "image_processor", processor)).__name__
    default = type(getattr(AutoProcessor.from_pretrained(str(model_dir), local_files_only=True,
                                                         trust_remote_code=trust), "image_processor", None)).__name__
    if default == chosen:
        return f"image processor {chosen} on both sides"
    return (f"image processor {chosen} on both sides (use_fast_tokenizer: {str(use_fast).lower()}, as the YAML's "
            f"preprocess_parameters say); the model's default is {default}: pixel values may differ slightly from it")


def batch_parity(config: dict[str, Any], model_dir: Path, spec: BatchSpec) -> dict[str, Any]:
    """Run both sides on the samples and judge; the payload the caller turns into a ParityResult."""
    from transformers import AutoProcessor

    from hooks.data.media import own_inputs

    trust = spec.trust_remote_code
    forward_keys = set(spec.forward_keys)
    refused = framework_import_error()
    if refused:
        return {"verdict": "error", "environment": refused, "details": [f"could not evaluate: {refused}"]}
    media = list(spec.media)  # none for text-only data (hooks.data.columns.for_data): the text-only sample alone
    rate = int(spec.sample_format.get("sampling_rate") or 16000)
    with tempfile.TemporaryDirectory(prefix="msmm-parity-") as tmp:
        work = Path(tmp)
        video = spec.video
        files = write_samples(work, video, media)
        batches = (plugin_batches(config, files, work) if spec.branch == "c" else
                   mindspeed_batches(config, files, work, meta_model(model_dir, trust)))
        if spec.kind in MODEL_CODE_KINDS:  # no processor: the model's own chat() or sample method
            return _code_check(batches, work, model_dir, spec)
        use_fast = bool((config["data"]["dataset_param"].get("preprocess_parameters") or {}).get("use_fast_tokenizer",
                                                                                                 True))
        processor = AutoProcessor.from_pretrained(str(model_dir), local_files_only=True, trust_remote_code=trust,
                                                  **own_load(spec.sample_format, use_fast))
        verdict, findings, names = "match", [_processor_choice(model_dir, trust, processor, use_fast)], []
        for index, (name, _, turns) in enumerate(cases(media)):
            names.append(name)
            ours = batches[index][1]
            try:
                own = own_inputs(processor, [own_conversation(index, work, media, rate)], spec.string_roles,
                                 spec.sample_format)
            except Exception as err:  # noqa: BLE001 - the model's own processor cannot take this sample either
                if isinstance(ours, Exception):
                    findings.append(f"{name}: not compared: the model's own processor fails on it too "
                                    f"({type(err).__name__}: {err})")
                    continue
                raise
            if isinstance(ours, Exception):
                payload = _could_not(name, ours)
                return {**payload, "details": [*findings, *payload["details"]], "samples": names}
            answers = [text for role, text, *_ in turns if role == "assistant"]
            verdict, notes = compare_sample(name, ours, own, processor.tokenizer, answers, spec.end_of_turn,
                                            forward_keys, spec.forward_kwargs)
            findings += notes
            if verdict != "match":
                break
        if verdict == "match" and video:
            names.append("video")
            own = own_inputs(processor, [[{"role": "user", "content": [
                {"type": "video", "video": video_clip(config, work / "clip.mp4")},
                {"type": "text", "text": VIDEO[2][0][1]}]}, {"role": "assistant", "content": [
                    {"type": "text", "text": VIDEO[2][1][1]}]}]], spec.string_roles,
                spec.sample_format)
            ours = batches[-2][1]
            if isinstance(ours, Exception):
                payload = _could_not("video", ours)
                return {**payload, "details": [*findings, *payload["details"]], "samples": names}
            verdict, notes = compare_sample("video", ours, own, processor.tokenizer, [VIDEO[2][1][1]],
                                            spec.end_of_turn, forward_keys, spec.forward_kwargs)
            findings += notes
        if verdict == "match":
            names.append("text only")
            length, batch = batches[-1]
            if isinstance(batch, Exception):
                payload = _could_not("text only", batch)
                return {**payload, "details": [*findings, *payload["details"]], "samples": names}
            verdict, notes = text_only_check(batch, length, "pixel_values" in forward_keys,
                                             list(spec.sample_format.get("audio_keys") or []))
            findings += notes
    return {"verdict": verdict, "details": by_sample(findings), "samples": names}


def own_load(form: dict[str, Any], use_fast: bool) -> dict[str, Any]:
    """How the reference loads the processor: as MindSpeed-MM's ``load_tokenizer`` does (``use_fast``), or, for the
    ``template`` convention, as the model card does, in the training mode its tokenizer takes (mistral_common's
    ``ValidationMode.finetuning``; its ``from_pretrained`` refuses ``use_fast``)."""
    if form.get("kind") != "template":
        return {"use_fast": use_fast}
    from hooks.data.records import dataset_runtime

    return {"mode": dataset_runtime().training_mode(form["load_mode"])} if form.get("load_mode") else {}


def by_sample(findings: list[str]) -> list[str]:
    """One line per note that several samples share ("one image, video: also trains ..."), in first-seen order:
    the same note once per sample is noise a reviewer of MIGRATION.md would delete."""
    samples = {name for name, _, _ in SAMPLES} | {name for name, _, _ in AUDIO_SAMPLES} | {
        OMNI_SAMPLE[0], VIDEO[0], "text only"}
    groups: dict[str, list[str]] = {}
    for line in findings:
        name, colon, note = line.partition(": ")
        if colon and name in samples:
            groups.setdefault(note, []).append(name)
        else:
            groups.setdefault(line, [])
    return [f"{', '.join(dict.fromkeys(names))}: {note}" if names else note for note, names in groups.items()]


def _code_check(batches: list[tuple[int, Any]], work: Path, model_dir: Path, spec: BatchSpec) -> dict[str, Any]:
    """Branch c without a processor class: against the model's own ``chat()`` (``hooks.data.model_code``), or its
    own sample method as the model card calls it (``hooks.data.model_method``)."""
    from hooks.data.model_code import check_code
    from hooks.data.model_context import check_context
    from hooks.data.model_method import check_method
    from mindspeed_mm.fsdp.utils.register import model_register

    samples = []
    for index, (name, _, turns) in enumerate(SAMPLES):
        pictures = [work / f"s{index}_{k}.png" for k in range(sum(len(t[2]) for t in turns))]
        user, answer = turns[0], turns[1][1] if len(turns) == 2 else None
        samples.append((name, pictures, "<image>" * len(user[2]) + user[1], answer))
    samples.append(("text only", [], "Say hi.", "Hi."))
    if spec.kind == "method":
        return check_method(batches, samples, model_dir, spec)
    if spec.kind == "recipe":
        from hooks.data.model_recipe import check_recipe

        return check_recipe(batches, samples, model_dir, spec)
    if spec.kind == "context":
        return check_context(batches, samples, model_dir, spec)
    return check_code(batches, samples, model_dir, spec, model_register._registry.get(spec.model_id))


def main(argv: list[str] | None = None) -> int:
    gc.disable()  # short-lived: collecting during the torch/transformers imports frees nothing useful
    parser = argparse.ArgumentParser(prog="python -m hooks.data.batch", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True, help="a YAML with the data section and plugins")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--spec", type=Path, required=True, help="JSON: what batch_parity() needs to know of the model")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import yaml

    try:
        payload = batch_parity(yaml.safe_load(args.config.read_text()), args.model_dir,
                               BatchSpec.from_dict(json.loads(args.spec.read_text())))
    except Exception as err:  # noqa: BLE001 - the check could not run: an error verdict with its cause
        payload = {"verdict": "error", "details": [f"could not evaluate: {type(err).__name__}: {err}"],
                   "environment": environment_cause(err),
                   "traceback": traceback.format_exc()[-4000:]}
    args.out.write_text(json.dumps(payload), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from hooks import exit_now

    sys.stdout.flush()
    exit_now(main())
