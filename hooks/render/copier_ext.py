"""Jinja filters that connect copier's questions to the probe: the extension copier loads.

Loaded by copier through copier-template-extensions (``hooks/render/copier_ext.py:MigrateExtension``)
inside *copier's* interpreter, which need not have torch. Three parts: the answers' own checks, pure
(``hooks.render.validators``); the probe session, every run of the training interpreter a question needs,
each waited for (``hooks.render.session``); and here, the glue: which filter each question calls, how a
failed check stops an unattended copy (``_stop_on_error``), what an interactive copy shows. Validators
return "" for a fine answer, else a message that names the field and the fix (copier shows it and writes
nothing).

Questions compute, they do not launch: the ``python`` validator runs the probe, which also gathers the data
evidence in a checkout, and waits for it to exit. Loading the extension makes copier's process the owner
of what the copy starts (``hooks.lifetime``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Undefined, pass_context
from jinja2.ext import Extension
from jinja2.runtime import Context

_TEMPLATE_ROOT = Path(__file__).resolve().parents[2]
if str(_TEMPLATE_ROOT) not in sys.path:  # copier loads this file by path; the checks live in hooks.model.facts
    sys.path.insert(0, str(_TEMPLATE_ROOT))
# `copier update` loads this file once per template version in one process (the old version's replay first, from a
# temporary clone it then deletes): this version's filters must import this version's hooks, not the cached ones.
_loaded = sys.modules.get("hooks")
if _loaded is not None and Path(getattr(_loaded, "__file__", "") or "").resolve().parents[1] != _TEMPLATE_ROOT:
    for _name in [n for n in sys.modules if n == "hooks" or n.startswith("hooks.")]:
        del sys.modules[_name]
    sys.path.remove(str(_TEMPLATE_ROOT))
    sys.path.insert(0, str(_TEMPLATE_ROOT))

from hooks.framework import checkout  # noqa: E402 - needs _TEMPLATE_ROOT on sys.path
from hooks.lifetime import OWNER_ENV  # noqa: E402
from hooks.model.facts import ModelFacts  # noqa: E402
from hooks.model.processor_facts import ProcessorFacts  # noqa: E402
from hooks.render.destination import collision_error, destination_error, owner_error  # noqa: E402
from hooks.render.files import configure_environment  # noqa: E402
from hooks.render.session import EVIDENCE, cutoff_error, facts_of, memory_plan, probe_extras, run_probe  # noqa: E402
from hooks.render.validators import (  # noqa: E402
    amount_error,
    branch_error,
    count_error,
    data_json_error,
    has_auto_map,
    model_dir_error,
    model_id_error,
    number_type,
    trust_error,
)


def copier_operation() -> str:
    """"copy" or "update": copier 9.19 keeps it in a context variable that questions cannot see."""
    try:
        from copier._main import _operation
    except ImportError:
        return "copy"
    return str(_operation.get("copy"))


def probe_error(model_path: str, python: str, trust_remote_code: bool, dst_path: str = "", model_id: str = "") -> str:
    """Run the probe once (cached); its failure becomes the validation message."""
    if model_dir_error(model_path):
        return ""  # reported by the model_path question
    consent = trust_error(model_path, trust_remote_code)
    if consent:  # a yes/no answer is never validated where it is given (copier 9.19): the copy stops here
        raise SystemExit(f"error: {consent}; nothing was written")
    extras = probe_extras(str(model_id), str(python), str(dst_path))
    code, out, err = run_probe(str(model_path), str(python), bool(trust_remote_code), extras)
    if code == 127:
        return f"python: cannot run {python!r} ({err}); give the interpreter of the training environment"
    if code not in (0, 1) or not out.strip():
        if os.environ.get("MSMM_DEBUG") == "1":  # the probe's whole output, traceback included
            print(err, file=sys.stderr, flush=True)
        tail = (err.strip().splitlines() or ["no output"])[-1]
        if tail.startswith("error: "):
            return tail[len("error: "):]  # our one-line message: bad input, the model's code, a timeout
        return (f"python: probing the model with {python} failed ({tail}); that interpreter needs torch and "
                "transformers 4.57.x")
    return ""


def needs_builder(model_path: str, python: str, trust_remote_code: bool) -> bool:
    """The release's ``chat()`` takes image tiles that neither its code nor its model card makes: the sample
    builder question is asked (``hooks.data.builder``)."""
    facts = facts_of(model_path, python, trust_remote_code)
    return bool(facts and facts.processor.needs_builder)


def builder_error(sample_builder: str, model_path: str, python: str, trust_remote_code: bool, dst_path: str = "",
                  model_id: str = "") -> str:
    """The sample builder, checked by the probe like the model's own code: its contract on a test image, then
    ``chat()`` with its tiles; empty, the answer names how to write one."""
    if not str(sample_builder or "").strip():
        facts = facts_of(model_path, python, trust_remote_code)
        processor = facts.processor if facts else ProcessorFacts()
        why = "; ".join(processor.problems or [])
        if processor.builder_contract == "prompt":
            return (f"sample_builder: nothing in the release builds a training sample ({why}); write its inference "
                    f"prompt from a skeleton (python -m hooks.data.builder {model_path} --skeleton my_builder.py "
                    "--contract prompt, taking the recipe from the release's or its base model's model card) and "
                    "answer my_builder.py:build_prompt")
        return (f"sample_builder: the release ships no image preprocessing for its chat() ({why}); write it from a "
                f"skeleton (python -m hooks.data.builder {model_path} --skeleton my_builder.py, taking the code from "
                "the release's or its base model's model card) and answer my_builder.py:load_image")
    extras = probe_extras(str(model_id), str(python), str(dst_path))
    code, out, err = run_probe(str(model_path), str(python), bool(trust_remote_code), extras, str(sample_builder))
    if code not in (0, 1) or not out.strip():
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return tail.removeprefix("error: ") if tail.startswith("error: sample_builder:") else (
            f"sample_builder: probing the model with {sample_builder} failed ({tail.removeprefix('error: ')})")
    problems = ModelFacts.from_dict(json.loads(out)).processor.problems or []
    return (f"sample_builder: {'; '.join(problems)}; fix {sample_builder} (its contract: python -m hooks.data.builder "
            f"{model_path} --skeleton NEW_FILE.py writes it down)") if problems else ""


_SHOWN: set[tuple[str, str, bool, str]] = set()


@pass_context
def probe_json(context: Context, model_path: str, python: str, trust_remote_code: bool,
               sample_builder: str = "") -> str:
    """The probe's ModelFacts as JSON, frozen into the answers file by an ``ask: false`` question.

    In an interactive copy the findings are shown here, once: copier evaluates this default
    right before it asks for the data branch, which the findings are the evidence for.
    """
    key = (str(model_path), str(python), bool(trust_remote_code), str(sample_builder or ""))
    code, out, _ = run_probe(*key[:3], builder=key[3])
    if code not in (0, 1) or not out.strip():
        return "{}"
    if key not in _SHOWN and _interactive(context):
        _SHOWN.add(key)
        from hooks import FINDINGS_SHOWN
        from hooks.model.facts_text import findings_text

        text = findings_text(ModelFacts.from_dict(json.loads(out)), str(model_path))
        print("\n" + text + "\n", file=sys.stderr, flush=True)
        export(FINDINGS_SHOWN, "1")  # the post-generation task need not repeat them
    return out.strip()


def export(name: str, value: str) -> None:
    """Set ``name`` for every process the copy starts: the probe (our ``subprocess``) and copier's
    tasks, which copier 9.19 starts with plumbum's copy of the environment taken at import time."""
    os.environ[name] = value
    try:
        from plumbum import local
    except ImportError:
        return
    local.env[name] = value


def _interactive(context: Context) -> bool:
    """Someone answers at a terminal: not ``--defaults``, stdin a TTY."""
    conf = context.get("_copier_conf")
    return not bool(getattr(conf, "get", lambda _k: None)("defaults")) and sys.stdin.isatty()


def _given(context: Context, field: str) -> bool:
    """The answer to ``field`` came with ``-d``/``--data-file`` (copier's ``data``), so no prompt asks for it."""
    conf = context.get("_copier_conf")
    return field in (getattr(conf, "get", lambda _k: None)("data") or {})


@pass_context
def data_evidence(context: Context, model_path: str, python: str, trust_remote_code: bool, model_id: str,
                  dst_path: str, model_facts: dict) -> str:
    """The data-parity evidence the probe gathered in the destination checkout, as JSON.

    Without a checkout (or when the check could not run) the probe's own recommendation stands, and says
    it was not checked. An interactive copy shows the verdicts above the data-branch question.
    """
    from hooks.data.candidates import DataEvidence, Recommendation, recommend

    found = EVIDENCE.get((str(model_path), str(python), bool(trust_remote_code))) if model_facts else None
    evidence = DataEvidence.from_dict(json.loads(found)) if found else None
    if evidence is not None and evidence.recommended.stop:  # the interpreter, not the data: nothing to render
        raise SystemExit(f"error: {evidence.recommended.stop}")
    if evidence is None:  # no checkout to run the candidates in: the data stage's choice from the facts alone
        facts = ModelFacts.of(model_facts)
        evidence = DataEvidence(recommend(facts, None) if facts else Recommendation("a", "", "qwen3vl", ""))
    elif ("evidence", str(model_id)) not in _SHOWN and _interactive(context):
        _SHOWN.add(("evidence", str(model_id)))
        lines = [f"  {c.label}: {c.verdict.upper()}" + ("" if c.verdict == "match" else f" ({c.evidence})")
                 for c in evidence.candidates]
        print("Data parity over a whole batch, against the model's own template and processor:", *lines, "",
              sep="\n", file=sys.stderr, flush=True)
    return json.dumps(evidence.to_dict(), sort_keys=True)


def data_fields_error(data_json: str, data_fields: str, media_root: str = "", model_path: str = "", python: str = "",
                 trust_remote_code: bool = False, model_facts: object = None) -> str:
    """Branch c's field mapping against the first record of the data, and an answer to train on in some record
    (``hooks.data.records``), then the media the mapped records name, decoded, and their lengths
    (``hooks.data.preflight``)."""
    from hooks.data.preflight import mapped_media, media_error
    from hooks.data.records import dataset_runtime, parse_fields
    from hooks.data.records import fields_error as check

    problem = check(os.path.expanduser(str(data_json or "")), str(data_fields or ""))
    if problem:
        return problem
    mapping = dataset_runtime().FieldMap(**parse_fields(str(data_fields or "")))
    return (_untaken(data_json, model_facts, mapping.audios_of, mapping.images_of,
                     lambda r: [text for _, text in mapping.turns(r)], branch="c")
            or media_error(str(data_json or ""), str(media_root or ""), mapped_media(mapping))
            or cutoff_error(data_json, media_root, data_fields, model_path, python, trust_remote_code, model_facts)
            or smoke_records_error(data_json))


def smoke_records_error(data_json: str) -> str:
    """Enough records for the smoke's ranks (``hooks.data.shapes.records_error``): the most it launches (2 gloo
    ranks on CPU, ``smoke_ranks``), one sample each (its ``micro_batch_size``), whole batches only."""
    from hooks.data.columns import data_records
    from hooks.data.shapes import records_error
    from hooks.framework.environment import smoke_ranks

    records = data_records(data_json)  # None: no data (the smoke's own sample has enough), or data_json's to say
    return "" if records is None else records_error(len(records), smoke_ranks("cpu", 0), 1, "the smoke")


def cluster_records_error(data_json: str, devices_per_node: object, nodes: object) -> str:
    """Enough records for the YAML's own run on the cluster the answers name: one sample (``micro_batch_size`` 1,
    the memory plan's unless it raises it) on each data-parallel rank. MindSpeed-MM's sampler takes the trainer's
    dp group, the whole world (``devices_per_node`` x ``nodes``) without sequence parallelism, which the YAML does
    not set; with fewer records the real launch dies in the sampler, not the copy's 2-rank smoke."""
    from hooks.data.columns import data_records
    from hooks.data.shapes import records_error

    records = data_records(data_json)  # None: no data (the generated sample), or data_json's own check says why
    if records is None or count_error(devices_per_node, "devices_per_node") or count_error(nodes, "nodes"):
        return ""  # ... or the numbers' own checks say what is wrong
    devices, hosts = int(str(devices_per_node)), int(str(nodes))
    return records_error(len(records), devices * hosts, 1, f"the YAML's run on {hosts} node(s) x {devices} device(s)",
                         "; or answer devices_per_node and nodes for the cluster you will train on")


def _untaken(data_json: str, model_facts: object, *of: Callable[..., list], branch: str = "") -> str:
    """A medium the records hold and the model takes none of (``hooks.data.audio.untaken_media_error``)."""
    from hooks.data.audio import untaken_media_error
    from hooks.data.preflight import CHECKED_RECORDS, DataError, read_records

    if not str(data_json or "").strip() or not isinstance(model_facts, dict):
        return ""
    try:
        records = read_records(Path(os.path.expanduser(str(data_json))))[:CHECKED_RECORDS]
    except (DataError, OSError):
        return ""  # data_json's own check says why
    return untaken_media_error(records, ModelFacts.of(model_facts), "data_json", *of, branch=branch)


def media_root_error(data_json: str, media_root: str, data_branch: str = "a", model_path: str = "", python: str = "",
                trust_remote_code: bool = False, model_facts: object = None) -> str:
    """``media_root`` is a folder and (branches a, b) the first records' images, videos and audio files exist
    inside it and decode, and the records fit the YAML's cutoff_len; branch c's records are checked through
    their mapping at the data_fields question."""
    from hooks.data.preflight import media_error as check

    if data_branch == "c":
        return check("", str(media_root or ""))  # the folder only
    return (_untaken(data_json, model_facts, branch=str(data_branch)) or check(str(data_json or ""),
                                                                                str(media_root or ""))
            or cutoff_error(data_json, media_root, "", model_path, python, trust_remote_code, model_facts)
            or smoke_records_error(data_json))


def _stop_on_error(check: Callable[..., str], *, interactive: bool = True) -> Callable[..., str]:
    """Return the validator's message for an interactive prompt, or stop copier cleanly.

    copier reports a failed validator as a traceback ending in the message when the
    answer came from ``--data``/``--defaults``. Where nobody can re-type the answer
    (``--defaults``, no terminal, or the field the message names given with ``-d``/``--data-file``,
    which copier never asks again) we exit with the message alone instead; either
    way it happens while asking, before anything is rendered. ``interactive=False``: a check
    for unattended runs only (copier validates a yes/no question's *default* before the person
    answers, and never their answer).
    """

    @pass_context
    @functools.wraps(check)
    def validate(context: Context, *args: object, **kwargs: object) -> str:
        attended = _interactive(context)
        if attended and not interactive:
            return ""
        message = check(*args, **kwargs)
        if message and (not attended or _given(context, message.split(":", 1)[0])):
            raise SystemExit(f"error: {message}")
        return message

    return validate


@dataclass(frozen=True)
class Answers:
    """The answers copier holds while it asks, read off its Jinja context once, so that copier.yml calls each check
    by its question's name instead of passing it six answers."""

    model_id: str = ""
    model_path: str = ""
    python: str = "python3"
    trust_remote_code: bool = False
    sample_builder: str = ""
    data_branch: str = "a"
    data_json: str = ""
    media_root: str = ""
    data_fields: str = ""
    devices_per_node: object = 8  # as given: the number questions' own validators say what is wrong with them
    device_memory_gb: object = 64
    nodes: object = 1
    model_facts: dict | None = None  # frozen facts: given with -d, recorded (update), or the probe's once asked
    dst_path: str = ""  # the destination checkout

    @classmethod
    def of(cls, context: Context) -> Answers:
        conf = context.get("_copier_conf")
        values = {name: value for name in cls.__dataclass_fields__
                  if not isinstance(value := context.get(name), Undefined) and value is not None}
        values["dst_path"] = str(getattr(conf, "get", lambda _k: "")("dst_path") or "")
        if not isinstance(values.get("model_facts"), dict) or not values.get("model_facts"):
            values["model_facts"] = None
        return cls(**values)

    @property
    def facts(self) -> ModelFacts | None:
        """The frozen facts, typed (None before the probe ran)."""
        return ModelFacts.of(self.model_facts)

    @property
    def probing(self) -> bool:
        """A copy whose facts come from the probe (on update, or with -d model_facts, the given facts stand in and
        the model folder may be gone)."""
        return copier_operation() == "copy" and self.model_facts is None


def where_error(a: Answers) -> str:
    """Where the copy writes (``hooks.render.destination``): a destination that is not a checkout's root stops the
    copy whoever answers (no answer to ``model_id`` fixes it); a path of the copy that holds someone else's file is
    ``model_id``'s message."""
    wrong = destination_error(a.dst_path)
    if wrong:
        raise SystemExit(f"error: {wrong}")
    return collision_error(a.model_id, a.dst_path)


def _checks() -> dict[str, tuple[Callable[[Answers], str], bool]]:
    """Each question's check: (the check, whether it may also re-ask at a terminal)."""
    copying = lambda check: lambda a: check(a) if copier_operation() == "copy" else ""  # noqa: E731
    probing = lambda check: lambda a: check(a) if a.probing else ""  # noqa: E731
    return {
        "model_id": (lambda a: model_id_error(a.model_id, a.dst_path) or copying(where_error)(a), True),
        "model_path": (lambda a: probing(lambda a: model_dir_error(a.model_path))(a)
                       or copying(lambda a: owner_error(a.model_id, a.model_path, a.dst_path))(a), True),
        "trust_remote_code": (probing(lambda a: trust_error(a.model_path, a.trust_remote_code)), False),
        "python": (probing(lambda a: probe_error(a.model_path, a.python, a.trust_remote_code, a.dst_path,
                                                 model_id=a.model_id)), True),
        "sample_builder": (probing(lambda a: builder_error(a.sample_builder, a.model_path, a.python,
                                                           a.trust_remote_code, a.dst_path, a.model_id)), True),
        "data_branch": (copying(lambda a: branch_error(a.data_branch, a.model_facts)), True),
        "data_json": (copying(lambda a: data_json_error(a.data_json, a.data_branch)), True),
        "media_root": (copying(lambda a: media_root_error(a.data_json, a.media_root, a.data_branch, a.model_path,
                                                     a.python, a.trust_remote_code, a.model_facts)), True),
        "data_fields": (copying(lambda a: data_fields_error(a.data_json, a.data_fields, a.media_root, a.model_path,
                                                       a.python, a.trust_remote_code, a.model_facts)), True),
        "devices_per_node": (lambda a: count_error(a.devices_per_node, "devices_per_node"), True),
        "device_memory_gb": (lambda a: amount_error(a.device_memory_gb, "device_memory_gb"), True),
        "nodes": (lambda a: count_error(a.nodes, "nodes")
                  or copying(lambda a: cluster_records_error(a.data_json, a.devices_per_node, a.nodes))(a), True),
    }


@pass_context
def validate(context: Context, question: str) -> str:
    """``validator: "{{ msmm_validate('<question>') }}"``: that question's check on the answers so far."""
    check, interactive = _checks()[question]
    return _stop_on_error(lambda: check(Answers.of(context)), interactive=interactive)(context)


@pass_context
def ask(context: Context, question: str) -> bool:
    """``when: "{{ msmm_ask('<question>') }}"``: whether a conditional question is asked."""
    a = Answers.of(context)
    if question == "trust_remote_code":  # the folder's own code defines the model
        return a.facts.remote_code if a.facts else has_auto_map(a.model_path)
    if question == "sample_builder":  # the release's chat() takes tiles nothing in the folder makes
        if a.facts:
            return a.facts.processor.form.builder is not None
        return needs_builder(a.model_path, a.python, a.trust_remote_code)
    raise KeyError(question)


@pass_context
def compute(context: Context, answer: str) -> str:
    """``default: "{{ msmm_compute('<answer>') }}"``: an ``ask: false`` answer the hooks compute and freeze."""
    a = Answers.of(context)
    if answer == "model_facts":
        return probe_json(context, a.model_path, a.python, a.trust_remote_code, a.sample_builder)
    if answer == "data_evidence":
        return data_evidence(context, a.model_path, a.python, a.trust_remote_code, a.model_id, a.dst_path,
                             a.model_facts or {})
    if answer == "memory_plan":
        from hooks.render.files import cutoff_len

        return memory_plan(str(a.model_path), str(a.python), bool(a.trust_remote_code), a.devices_per_node,
                           a.device_memory_gb, a.nodes, cutoff_len(a.facts),
                           a.facts.trained_submodule.name if a.facts and a.facts.trained_submodule else "")
    if answer == "framework":
        return json.dumps(checkout.facts(os.path.expanduser(a.dst_path)))
    raise KeyError(answer)


class MigrateExtension(Extension):
    """Gives copier.yml its three calls (``msmm_validate``, ``msmm_ask``, ``msmm_compute``, each by a question's
    name) and the templates their filters."""

    def __init__(self, environment):  # noqa: ANN001 - jinja's signature
        super().__init__(environment)
        export(OWNER_ENV, str(os.getpid()))  # copier's process owns what the copy starts (hooks.lifetime)
        environment.globals.update(msmm_validate=validate, msmm_ask=ask, msmm_compute=compute)
        environment.filters.update(msmm_number_type=number_type)
        configure_environment(environment)
