"""The data evidence at copy time: each candidate data path rendered as the copy would write it, and checked.

The data-branch question's default is the first candidate whose batches equal the model's own
(``hooks.data.parity``): MindSpeed-MM's in-repo templates for the family (branch a), then the template
derived from the model's own chat template (branch b). A candidate is rendered here, with the same
partial and the destination checkout's framework facts the copy itself would use, so the evidence is
about the YAML and plugins the copy would write. None matching recommends branch c, with each
candidate's first difference.

In a MindSpeed-MM checkout the probe's process gathers it once the facts are written, with the torch and
transformers it has imported (``hooks.probe --data-evidence``), and exits; the data-branch question's
default reads it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hooks.data.batch_spec import BatchSpec
from hooks.data.candidates import Candidate, CandidateVerdict, DataEvidence, candidates, recommend
from hooks.data.parity import (
    ParityResult,
    data_plugin_files,
    enter_framework,
    load_cached_verdict,
    parity_key,
    result_from_payload,
    run_check,
    spec_for,
    store_verdict,
)
from hooks.model.facts import ModelFacts


def candidate_config(scratch: Path, candidate: Candidate, answers: dict[str, Any], dest: Path) -> dict[str, Any]:
    """The YAML the copy would write for ``candidate`` into checkout ``dest`` (same partial, that checkout's
    framework facts), its data plugins in ``scratch``."""
    import yaml

    from hooks.framework.checkout import facts
    from hooks.render.files import render_data_plugin, render_template_file

    context = {"model_id": answers["model_id"], "model_facts": answers["model_facts"],
               "model_path": answers["model_path"], "trust_remote_code": bool(answers.get("trust_remote_code")),
               "data_branch": candidate.branch, "chat_template": candidate.template,
               "collator_id": candidate.collator_id, "data_json": "", "media_root": "",
               "framework": facts(dest)}
    config = yaml.safe_load(render_template_file("partials/config.yaml.jinja", context))
    plugins = [p for p in config["training"]["plugin"] if "/fsdp/models/" not in p]  # the model plugin is not data
    if candidate.branch == "b":
        plugins.insert(0, render_data_plugin(scratch, answers["model_id"], answers["model_facts"]).name)
    config["training"]["plugin"] = plugins
    return config


def gather_evidence(dest: Path, answers: dict[str, Any], mindspeed_home: Path | None,
                    in_process: bool = False) -> DataEvidence:
    """Try the candidates in order until one matches; the verdicts and the recommendation."""
    facts, model_dir = ModelFacts.from_dict(answers["model_facts"]), Path(answers["model_path"]).resolve()
    spec = spec_for(facts, bool(answers.get("trust_remote_code")))
    tried: list[tuple[Candidate, ParityResult]] = []
    with tempfile.TemporaryDirectory(prefix="msmm-candidates-") as tmp:  # candidate YAMLs and plugins
        scratch = Path(tmp)
        if in_process:
            enter_framework(dest, mindspeed_home, scratch)
        for candidate in candidates(facts, answers["model_id"]):
            config = candidate_config(scratch, candidate, answers, dest)
            key = parity_key(dest, model_dir, config, data_plugin_files(config, dest, scratch), spec,
                             answers["python"])
            result = load_cached_verdict(key)
            if result is None:
                result = (result_from_payload(_check_here(config, model_dir, spec)) if in_process else
                          run_check(dest, model_dir, config, spec, python=answers["python"],
                                    mindspeed_home=mindspeed_home, scratch=scratch))
                store_verdict(key, result)
            result.candidate = candidate.label()
            tried.append((candidate, result))
            if result.ok or result.environment:  # an interpreter that cannot run the framework fails every one
                break
    return DataEvidence(recommend(facts, tried), [CandidateVerdict(c.branch, c.template, c.collator_id, c.label(),
                                                                   r.verdict, r.headline()) for c, r in tried])


def _check_here(config: dict[str, Any], model_dir: Path, spec: BatchSpec) -> dict[str, Any]:
    try:
        from hooks.data.batch import batch_parity

        return batch_parity(config, model_dir, spec)
    except Exception as err:  # noqa: BLE001 - an error verdict with its cause (not cached)
        from hooks.data.framework_batches import environment_cause

        return {"verdict": "error", "details": [f"could not evaluate: {type(err).__name__}: {err}"],
                "environment": environment_cause(err)}
