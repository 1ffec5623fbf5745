"""The model facts (``hooks.model.facts``) as text: the table for MIGRATION.md and the terminal, and the probe's
findings in a few lines for an 80-column terminal.
"""

from __future__ import annotations

from hooks.model.facts import ModelFacts
from hooks.model.modality import input_medium
from hooks.model.plan import Plan
from hooks.model.processor_facts import ProcessorFacts


def _processor_line(proc: ProcessorFacts) -> str:
    if not proc.loaded:
        return f"not loaded ({proc.error or 'skipped'})"
    chat = proc.chat_format
    form = ("chat format: " + ("slots" if chat.expressible else "not slots")) if chat else "no chat template"
    return f"{proc.class_name}, image token {proc.image_token!r}, outputs {proc.output_keys}, {form}"


def ignored_media_text(facts: ModelFacts) -> str:
    return (f"{facts.architecture}.forward takes {facts.unused_media} but never uses them: the media would not reach "
            "the model and it would train on text alone")


def towers_text(plan: Plan) -> str:
    """The plan's towers with the medium each encodes (``Plan.towers``), then the language tower."""
    parts = [f"{name} ({medium or 'no medium: not an encoder'})" for name, medium in plan.towers.items()]
    if plan.language_tower:
        parts.append(f"{plan.language_tower} (language)")
    return ", ".join(parts) or "none found"


def render_table(facts: ModelFacts) -> str:
    """Human-readable summary for the terminal and MIGRATION.md."""
    plan = facts.plan
    lines = [
        f"class            {facts.architecture} ({facts.class_module})",
        f"model_type       {facts.model_type}  sub-configs {facts.sub_configs}",
        f"parameters       {facts.num_parameters:,}",
        f"forward          {', '.join(facts.forward_params)}{', **kwargs' if facts.forward_accepts_kwargs else ''}",
        f"returns .loss    {facts.returns_loss}   tied embeddings {facts.tie_word_embeddings}",
        f"no_split         {', '.join(facts.no_split_modules)}",
        f"media tokens     {facts.media_tokens}",
        f"processor        {_processor_line(facts.processor)}",
        f"towers           {towers_text(plan)}",
        *([f"trains           {stage.name} of {stage.published_class} only: {stage.reason}"]
          if (stage := facts.trained_submodule) else []),
        "",
        f"{'fsdp pattern':56} {'matched':>7} {'params':>14}",
    ]
    for rep in plan.reports:
        lines.append(f"{rep.pattern:56} {rep.matched:>7} {rep.params:>14,}")
    lines += [
        f"share of parameters in non-root units: {plan.non_root_share:.1%}",
        f"recompute        {plan.recompute_modules}",
        f"expert parallel  {plan.ep_modules or 'none (dense)'}",
        f"freeze proposal  {plan.freeze_proposal} (media encoders; not applied by default)",
    ]
    lines += [f"PROBLEM: {p}" for p in plan.problems]
    return "\n".join(lines)


def findings_text(facts: ModelFacts, model_path: str, width: int = 78) -> str:
    """The probe's findings in a few lines for an 80-column terminal: the evidence for the data branch.

    The recommendation itself and its reason are the data-branch question's help, right below.
    """
    from hooks.terminal import wrap

    plan, proc = facts.plan, facts.processor
    media = [p for p in facts.forward_params if input_medium(p) or "grid" in p]
    processor = (f"{proc.class_name}, chat template {'yes' if proc.has_chat_template else 'no'}, "
                 f"image token {proc.image_token!r}" if proc.loaded else f"not loaded ({proc.error})")
    stage = facts.trained_submodule
    rows = [
        ("class", f"{facts.architecture} ({'remote code' if facts.remote_code else facts.class_module.split('.')[0]})"),
        *([("trains", f"{stage.name} of {stage.published_class} only: {stage.reason}")] if stage else []),
        ("parameters", f"{facts.num_parameters:,}; tied embeddings {'yes' if facts.tie_word_embeddings else 'no'}"),
        ("processor", processor),
        ("media inputs", ", ".join(media) or "none in forward()"),
        ("towers", towers_text(plan)),
        ("FSDP2 units", f"{len(plan.apply_modules)} patterns, {plan.non_root_share:.1%} of parameters "
                        "outside the root"),
        ("recompute", f"{len(plan.recompute_modules)} patterns; expert parallel: "
                      f"{', '.join(plan.ep_modules) or 'none (dense)'}"),
    ]
    build = facts.build
    if build.how:
        rows.append(("built on", f"{build.how} ({'; '.join(build.failures)})" if build.failures else build.how))
    rows += [("attention", f"the model's code sets {name} to {value!r} itself: the YAML's attn_implementation "
                           "does not reach it") for name, value in build.attention_set_by_model.items()]
    if facts.unused_media:
        rows.append(("PROBLEM", ignored_media_text(facts)))
    rows += [("PROBLEM", problem) for problem in plan.problems]
    lines = [f"Probe findings ({build.how or 'meta device'}, no weights read):"]
    for key, value in [("model folder", model_path), *rows]:
        lines += wrap(f"  {key:<13}{value}", width, hang=15)
    return "\n".join(lines)
