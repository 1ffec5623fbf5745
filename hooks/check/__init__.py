"""``python -m hooks.check [CHECKOUT] [--smoke]``: are the migrated models in a MindSpeed-MM checkout still sound?

For every ``.copier-answers/<model_id>.yml`` in the checkout, without training (fit for a fork's CI):

1. **settings**: the model's YAML against the checkout's live settings schema (``hooks.framework.checkout``):
   unknown keys (the trainer accepts them silently and goes on without them), moved keys (recompute and
   ``loss_cfg`` where this checkout does not read them; a key that exists at another place), deprecated keys.
   Only the settings sections are checked (``model``, ``parallel``, ``training``, ``features``, ``tools`` and
   ``data.dataloader_param``); ``data.dataset_param`` is a dict the dataset itself reads.
2. **registries**: the chat template, the collator, the dataset type and the model id are registered by the
   checkout or by the plugins in ``training.plugin``.
3. **plugin imports**: the ``training.plugin`` paths exist, the model's plugin files parse, and every name they
   import from ``mindspeed_mm`` (or relatively, from their own folder) exists in the checkout.
4. **hook signatures**: ``overwrite_transformer_config`` takes as many arguments as this checkout's ModelHub passes.
5. **forward-key filter**: a plugin's ``_FORWARD_KEYS`` keeps every forward parameter the answers record.
6. **conflicts**: merge-conflict markers in the model's generated files, ``.rej`` files next to them.
7. **revision**: the framework revision the model was migrated against vs the checkout's (an info line).
8. **system test**: ``tests/st/`` holds the model's script, run config and baseline, which device the baseline came
   from, and whether it is stale (another framework revision, a changed run config): ``hooks.check.system_test``.

``--smoke`` also runs each model's smoke (``python -m hooks.smoke``, REPORT.md left as is) and reports its
verdict. One line per finding, ``<model_id>: error|warning|info: <finding> — fix: <what to do>``, then a
summary; the exit status is 1 when any finding is an error. The files are parsed, never imported.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hooks import dig, scaffold
from hooks.check.findings import LEVELS, Finding, Framework, update_command
from hooks.check.leftovers import conflict_findings, revision_findings, smoke_findings
from hooks.check.plugin_code import plugin_findings
from hooks.check.registries import plugin_path, registry_findings
from hooks.check.schema import schema_findings
from hooks.check.system_test import system_test_findings
from hooks.terminal import echo

# --- the check ---------------------------------------------------------------------------------------------


def check_model(answers_path: Path, fw: Framework, *, smoke: bool = False) -> list[Finding]:
    """Every finding for one migrated model."""
    import yaml

    dest = fw.dest
    model_id = answers_path.stem
    found: list[Finding] = []
    try:
        answers = yaml.safe_load(answers_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        answers = {}
        found.append(Finding("error", f"{answers_path.relative_to(dest)} does not parse ({type(exc).__name__})",
                             "resolve its merge conflict or restore it from git"))
    model_id = str(answers.get("model_id") or model_id)
    config = dest / scaffold.config_yaml(model_id)
    cfg: dict[str, Any] | None = None
    if not config.is_file():
        found.append(Finding("error", f"{config.relative_to(dest)} is missing",
                             f"re-render: {update_command(model_id)}"))
    else:
        try:
            cfg = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            found.append(Finding("error", f"{config.relative_to(dest)} does not parse ({type(exc).__name__})",
                                 "fix the YAML (an unresolved merge?)"))
    if isinstance(cfg, dict):
        found += schema_findings(cfg, fw)
        plugins = []
        for entry in dig(cfg, "training", "plugin") or []:
            path = plugin_path(dest, str(entry))
            if path is None:
                found.append(Finding("error", f"training.plugin names {entry}, which is not in this checkout "
                                     "(the trainer skips it with 'Import failed')", "fix the path or remove it"))
            else:
                plugins.append(path)
        found += registry_findings(cfg, fw, model_id, plugins, answers)
    found += plugin_findings(dest, model_id, answers, int(fw.facts.get("hook_arity") or 3))
    found += conflict_findings(dest, model_id)
    found += revision_findings(answers, fw, model_id)
    found += system_test_findings(dest, model_id, fw.facts.get("revision"))
    if smoke and not any(f.level == "error" for f in found):
        found += smoke_findings(dest, answers_path)
    elif smoke:
        found.append(Finding("info", "smoke not run: fix the errors above first",
                             f"python -m hooks.check --smoke {dest}"))
    order = {level: i for i, level in enumerate(LEVELS)}
    found.sort(key=lambda f: order[f.level])
    return [replace(f, model=model_id) for f in found]


def check(dest: Path, *, smoke: bool = False) -> tuple[list[Finding], int]:
    """(findings, number of models) for the checkout ``dest``."""
    answers = sorted((dest / scaffold.ANSWERS_DIR).glob("*.yml"))
    if not answers:
        return [], 0
    fw = Framework.read(dest)
    return [f for path in answers for f in check_model(path, fw, smoke=smoke)], len(answers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.check", description=__doc__.splitlines()[0])
    parser.add_argument("checkout", nargs="?", type=Path, default=Path.cwd(),
                        help="MindSpeed-MM checkout root (default: cwd)")
    parser.add_argument("--smoke", action="store_true", help="also run each model's smoke (minutes per model)")
    args = parser.parse_args(argv)
    dest = args.checkout.resolve()
    if not dest.is_dir():
        print(f"error: {dest} is not a folder", file=sys.stderr)
        return 2
    findings, models = check(dest, smoke=args.smoke)
    if not models:
        print(f"no migrated models in {dest} (no {scaffold.ANSWERS_DIR}/*.yml): nothing to check")
        return 0
    for finding in findings:
        echo(finding.line())
    counts = {level: sum(f.level == level for f in findings) for level in LEVELS}
    failing = sorted({f.model for f in findings if f.level == "error"})
    echo(f"checked {models} migrated model{'s' if models != 1 else ''} in {dest}: {counts['error']} errors, "
         f"{counts['warning']} warnings, {counts['info']} info"
         + (f" ({', '.join(failing)} failing)" if failing else ""))
    return 1 if counts["error"] else 0

