"""The answers' own checks: pure functions of the answer, the model folder's files and the checkout.

copier's validators (``hooks.render.copier_ext``) call these; none starts a process. What needs the
training interpreter (the probe, a cluster's memory plan, the samples' lengths) is the probe session's
(``hooks.render.session``). Each returns "" for a fine answer, else one message that names the field and
the fix.
"""

from __future__ import annotations

import json
import keyword
import os
import re
from pathlib import Path

from hooks import scaffold
from hooks.model.facts import ModelFacts

_REGISTER = re.compile(r"""register\(\s*["']([^"']+)["']\s*\)""")



def model_id_error(model_id: str, dst_path: str = "") -> str:
    """Reject ids that are not identifiers or that another plugin of the checkout registers (a path of the copy that
    is already taken: ``hooks.render.destination.collision_error``)."""
    if not model_id:
        return "model_id: required, e.g. qwen2_5_vl"
    if not model_id.isidentifier() or keyword.iskeyword(model_id) or model_id != model_id.lower():
        return f"model_id: {model_id!r} must be a lower-case Python identifier (letters, digits, _), e.g. qwen2_5_vl"
    dst = Path(str(dst_path or "."))
    models = dst / scaffold.models_root()
    own = dst / scaffold.model_plugin_dir(model_id)
    if models.is_dir():
        for source in sorted(models.rglob("*.py")):
            if own in source.parents:
                continue
            if model_id in _REGISTER.findall(source.read_text(errors="replace")):
                rel = source.relative_to(dst)
                return f"model_id: {model_id!r} is already registered by {rel}; choose another id"
    return ""



def _model_dir_problem(model_path: str, trust_remote_code: bool) -> str:
    """The probe's own cheap checks (``hooks.model.facts.check_model_dir``), as a message or ""."""
    if not model_path:
        return "model_path: required: the local folder with config.json, weights, tokenizer and processor"
    from hooks.model.facts import check_model_dir
    from hooks.model.loading import ProbeError

    try:
        check_model_dir(Path(os.path.expanduser(str(model_path))), trust_remote_code=trust_remote_code)
    except ProbeError as err:
        return str(err)
    return ""



def model_dir_error(model_path: str) -> str:
    """Folder and config.json problems (asked before trust_remote_code, so consent is not judged here)."""
    return _model_dir_problem(model_path, trust_remote_code=True)



def has_auto_map(model_path: str) -> bool:
    """Whether the folder's own code defines the model (``auto_map``, or neither it nor ``model_type``: the
    custom-model path): only then is consent asked for."""
    from hooks.model.loading import is_custom_model

    config = Path(os.path.expanduser(str(model_path or ""))) / "config.json"
    try:
        raw = json.loads(config.read_text())
        return bool(raw.get("auto_map")) or is_custom_model(raw)
    except (OSError, ValueError, AttributeError):
        return False



def trust_error(model_path: str, trust_remote_code: bool) -> str:
    """A config with auto_map runs the model's own Python code: that needs explicit consent."""
    problem = _model_dir_problem(model_path, trust_remote_code)
    return problem if problem.startswith("trust_remote_code:") else ""



def data_json_error(data_json: str, data_branch: str = "a") -> str:
    """The data file parses, holds records and (branches a, b) is in the huggingface shape."""
    from hooks.data.preflight import data_error as check

    return check(str(data_json or ""), str(data_branch or "a"))



def branch_error(data_branch: str, model_facts: ModelFacts | dict | None) -> str:
    """Branch b writes a template from the slots read off the model's chat template: it needs one that reads.
    Branch c without a processor class builds samples with the model's own data code: it needs that code."""
    facts = ModelFacts.of(model_facts) if isinstance(model_facts, dict | ModelFacts) else None
    if facts is None:
        return ""
    if str(data_branch) == "c":
        from hooks.data.candidates import unbuildable

        why = unbuildable(facts)
        processor = facts.processor
        card = ("add the release's model card (README.md, whose quick-start defines the image preprocessing) to "
                "the model folder, or " if processor.missing and not processor.model_card else "")
        return (f"data_branch: no branch can build a training sample for this model ({why}); {card}write the "
                "dataset plugin by hand (MindSpeed-MM's migration guide, branch C)") if why else ""
    if str(data_branch) != "b":
        return ""
    chat = facts.processor.chat_format
    from hooks.data.candidates import audio_unexpressible

    if chat and chat.expressible and (unheard := audio_unexpressible(facts)):
        return (f"data_branch: b derives a template from the model's chat template, which cannot carry the model's "
                f"audio ({unheard}); answer c (a dataset plugin on the model's own processor)")
    if chat and chat.expressible:
        return ""
    why = "; ".join(chat.problems if chat else []) or "the model's processor has no chat template"
    return (f"data_branch: b derives a template from the model's chat template, and {why}; answer c (a dataset "
            "plugin on the model's own processor) or a")



def count_error(value: object, field: str) -> str:
    """A count answer (devices per node) is a whole number of at least 1."""
    try:
        ok = int(str(value)) >= 1
    except ValueError:
        ok = False
    return "" if ok else f"{field}: {value!r} is not a whole number of at least 1; answer e.g. 8"



def amount_error(value: object, field: str) -> str:
    """An amount answer (GiB per device) is a positive number."""
    try:
        ok = float(str(value)) > 0
    except ValueError:
        ok = False
    return "" if ok else f"{field}: {value!r} is not a positive number; answer e.g. 64"



def number_type(answer: object, kind: str) -> str:
    """The copier ``type`` of a number question: ``kind`` (``int``/``float``), or ``str`` for an answer it cannot cast.

    copier 9.19 casts an answer given with ``-d``/``--data-file`` with ``int()``/``float()`` before any validator
    runs, and lets the ValueError of ``int("eight")`` out as a traceback (``Question.cast_answer`` turns only
    TypeError into its own error). Typed ``str`` for that one answer, it reaches the question's validator,
    which names the field and stops the copy; a number (every valid answer, the default, an interactive
    prompt) keeps ``kind``, so the answers file and the templates see the same number as before.
    """
    try:
        (int if kind == "int" else float)(str(answer))  # "8.5" devices: a str, for the validator to reject
    except ValueError:
        return "str"
    return kind

