"""Which data paths to try for a model, and which to recommend once they were tried.

Candidates come in a fixed order: the templates MindSpeed-MM already has for the model's family
(branch a: a reviewer prefers the framework's own code), then the template derived from the
model's own chat template (branch b). ``recommend`` picks the first one that data parity found to
match (``hooks.data.parity``); with none matching, branch c (a dataset plugin) with each one's
first difference. Without a checkout nothing can be run: the family table decides, then a
derivable chat format, then branch c, and the reason says it was not checked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from hooks.data import MODEL_CODE_KINDS
from hooks.model.facts import ModelFacts

# In-repo templates per model_type (MindSpeed-MM's template.py): the branch-a candidates, tried first.
FAMILY_TEMPLATES: dict[str, list[tuple[str, str]]] = {
    "qwen2_vl": [("qwen2vl", "qwen3vl")],
    "qwen2_5_vl": [("qwen2vl", "qwen3vl")],
    "qwen3_vl": [("qwen3_vl_nothink", "qwen3vl")],
    "qwen3_vl_moe": [("qwen3_vl_nothink", "qwen3vl")],
    "qwen3_5": [("qwen3_vl_nothink", "qwen3vl")],  # examples/qwen3_5/*.yaml (transformers >= 5)
    "qwen3_5_moe": [("qwen3_vl_nothink", "qwen3vl")],
    "glm4v": [("glm4.1v", "qwen3vl")],
    "glm4v_moe": [("glm4v_moe", "qwen3vl")],
    # Omni thinkers (audio, image, video): MindSpeed-MM's templates with their audio-aware mm_plugins; the qwen3vl
    # collator computes Qwen2.5-Omni's positions with the clips' lengths, examples/qwen3omni uses qwen3omni.
    # Qwen3-Omni's released templates (Instruct and Thinking) add an empty <think> block only to an answer after
    # the last user turn written as a plain string (their last-query index skips content lists), so none where the
    # turns are content lists: the plain qwen3_omni_nothink comes first; qwen3_omni is a ReasoningTemplate that
    # always adds an empty thought (examples/qwen3omni's `enable_thinking: false` is read into DataArguments but
    # never handed to the template in 57069cd5, so the YAML need not write it).
    "qwen2_5_omni": [("qwen2_omni", "qwen3vl")],
    "qwen3_omni_moe": [("qwen3_omni_nothink", "qwen3omni"), ("qwen3_omni", "qwen3omni"), ("qwen3_omni", "qwen3vl")],
}


@dataclass(frozen=True)
class Candidate:
    """One data path to try: a registered template (branch a) or the derived one (branch b)."""

    branch: str
    template: str
    collator_id: str

    def label(self) -> str:
        return (f"in-repo template {self.template!r} with the {self.collator_id} collator" if self.branch == "a"
                else "the template derived from the model's own chat template")


def candidates(facts: ModelFacts, model_id: str) -> list[Candidate]:
    """In-repo templates for the family first, then the derived one (when the chat format is slots)."""
    found = [Candidate("a", template, collator) for template, collator in FAMILY_TEMPLATES.get(facts.model_type, [])]
    chat, proc = facts.processor.chat_format, facts.processor
    if chat and chat.expressible and (proc.media_format or not chat.image_item) and not (
            audio_unexpressible(facts)):
        found.append(Candidate("b", model_id, "qwen3vl"))
    return found


def audio_unexpressible(facts: ModelFacts) -> str:
    """Why a derived template cannot carry this model's audio ("" when it can, or the model takes none): the
    template writes no fixed item per clip (Qwen2-Audio numbers them: ``Audio 1: ...``), so only the processor's
    own chat template (branch c) writes the model's format."""
    if "audio" not in (facts.processor.media or []):
        return ""
    chat = facts.processor.chat_format
    if chat and chat.audio_item:
        return ""
    note = next((n for n in (chat.notes if chat else []) if "audio" in n), "")
    return note or "the chat template writes no item for an audio clip"


@dataclass
class Recommendation:
    """The data branch a copy defaults to, and why: the data-branch question's default and its help."""

    branch: str  # "a", "b" or "c"; "" where nothing could be judged (``stop``)
    template: str  # branch a's in-repo template, branch b's derived one ("" for c)
    collator_id: str  # the registered collator the template goes with
    reason: str  # one sentence: what matched, or why no template does
    stop: str = ""  # the interpreter cannot run the framework's data path: the copy stops, naming this

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if k != "stop" or v}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recommendation:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass
class CandidateVerdict:
    """One candidate data path as the copy tried it (``hooks.render.evidence``): what it is and its parity verdict."""

    branch: str
    template: str
    collator_id: str
    label: str  # ``Candidate.label``
    verdict: str  # "match", "mismatch" or "error" (could not evaluate)
    evidence: str  # the verdict's headline: what a match rests on, or the first difference


@dataclass
class DataEvidence:
    """The data-path verdict frozen into the answers file (``data_evidence``): the candidates tried, in order, and the
    recommendation. Without a checkout nothing was tried, and the recommendation says it was not checked."""

    recommended: Recommendation
    candidates: list[CandidateVerdict] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": [asdict(c) for c in self.candidates], "recommended": self.recommended.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> DataEvidence | None:
        """The evidence of an answers file; None where it has none (a copy made with ``--skip`` of the question)."""
        if not data or "recommended" not in data:
            return None
        return cls(Recommendation.from_dict(data["recommended"]),
                   [CandidateVerdict(**c) for c in data.get("candidates") or []])


class Verdict(Protocol):
    ok: bool
    verdict: str  # "match" | "mismatch" | "error" (could not evaluate)
    environment: str  # set when the interpreter, not the data path, is the cause

    def first_difference(self) -> str: ...


def recommend(facts: ModelFacts, tried: list[tuple[Candidate, Verdict]] | None) -> Recommendation:
    """The data branch to default to and why: the first candidate that matched, else branch c.

    Without a checkout (``tried`` None) nothing could be run: the family table decides (a), else
    a derivable chat format (b), else c, and the reason says so.
    """
    if tried is None:
        options = candidates(facts, "")
        if not options:
            return _plugin(_why_not_slots(facts) + ("" if unbuildable(facts) else
                                                    "; a dataset plugin builds the model's inputs"))
        best = options[0]
        return Recommendation(best.branch, best.template, best.collator_id,
                              f"{best.label()} fits model_type {facts.model_type} (not checked: no MindSpeed-MM "
                              "checkout to run data parity in)")
    stop = next((r.environment for _, r in tried if r.environment), "")
    if stop:  # the interpreter cannot run the framework's data path: no branch can be judged, none is chosen
        return Recommendation("", "", "", stop, stop)
    for candidate, result in tried:
        if result.ok:
            before = "; ".join(_not_this(c, r) for c, r in tried if c != candidate)
            return Recommendation(candidate.branch, candidate.template, candidate.collator_id,
                                  f"{candidate.label()} reproduces the model's own data over a whole batch (data "
                                  "parity MATCH)" + (f"; {before}" if before else ""))
    mismatches = [(c, r) for c, r in tried if r.verdict == "mismatch"]
    unevaluated = "; ".join(_not_this(c, r) for c, r in tried if r.verdict != "mismatch")
    if mismatches:
        differences = "; ".join(f"{c.label()}: {r.first_difference()}" for c, r in mismatches)
        return _plugin(f"no template reproduces the model's own data ({differences}"
                       + (f"; {unevaluated}" if unevaluated else "") + "): a dataset plugin builds the model's inputs")
    if tried:  # only could-not-evaluate: no evidence either way, and the reason says so
        return _plugin(f"no template could be evaluated here ({unevaluated}): branch c's dataset plugin on the "
                       "model's own processor is the path left; it is checked against that processor before the smoke")
    return _plugin(f"{_why_not_slots(facts)}: no branch can build a sample" if unbuildable(facts) else
                   f"no template reproduces the model's own data ({_why_not_slots(facts)}): a dataset plugin builds "
                   "the model's inputs")


def _plugin(reason: str) -> Recommendation:
    """Branch c: a dataset plugin (the collator answer keeps its default)."""
    return Recommendation("c", "", "qwen3vl", reason)


def unbuildable(facts: ModelFacts) -> str:
    """Why branch c's dataset plugin could not build a training sample for this model ("" when it can).

    Two states: a processor whose one-image call raised (how it makes a sample is unknown), and a model
    without a processor class whose own data code (``hooks.data.model_code``) the probe found nowhere or
    could not run. Either way every branch would render a data path that fails on the first sample.
    """
    proc = facts.processor
    if proc.unevaluated:  # its call raised: how it makes a sample is unknown, so no plugin can rely on it
        return f"could not evaluate the model's processor on one image and a text ({(proc.error or '')[:300]})"
    if not proc.missing or proc.form.kind in MODEL_CODE_KINDS:
        return ""
    return "; ".join(proc.problems or []) or proc.error or "the model has no processor class"


def _not_this(candidate: Candidate, result: Verdict) -> str:
    """Why a candidate was passed over: its first difference, or that it could not be evaluated and why."""
    if result.verdict == "mismatch":
        return f"{candidate.label()} does not ({result.first_difference()})"
    return f"{candidate.label()}: {result.first_difference()}"


def _why_not_slots(facts: ModelFacts) -> str:
    if why := unbuildable(facts):
        return f"nothing in the model's release builds a training sample here: {why}"
    proc = facts.processor
    form = proc.form
    if proc.data_format is None and form.template_on or form.image_mark:  # Phi-3-vision
        where = ("the tokenizer's chat template (the processor has none)" if form.template_on
                 else "the chat template")
        mark = (f", images written into string content as the processor's {form.image_mark.format(n=1)!r} marks"
                if form.image_mark else "")
        return f"{where} is read as the model card calls it{mark}, which MindSpeed-MM's templates do not write"
    if proc.entry_method:  # Molmo
        return (f"the processor's entry is its own {proc.entry_method}() method, which writes the prompt itself (no "
                "chat template MindSpeed-MM's templates could follow)")
    if proc.data_format is None:
        return proc.error or "the model has no chat template"
    return ("; ".join(proc.chat_format.problems if proc.chat_format else []) or audio_unexpressible(facts)
            or "its chat format is not slots")
