"""6-7. What updates leave behind (conflict markers, ``.rej`` files), the revision migrated against, the smoke."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from hooks import env_with_hooks, scaffold
from hooks.check.findings import Finding, Framework, update_command
from hooks.check.registries import files_under, own_dirs
from hooks.framework import checkout
from hooks.scaffold import StPaths

# --- 6. conflicts ------------------------------------------------------------------------------------------


def conflict_findings(dest: Path, model_id: str) -> list[Finding]:
    """Merge-conflict markers in the model's generated files and ``.rej`` files next to them."""
    found: list[Finding] = []
    answers = dest / scaffold.answers_file(model_id)
    files = [answers] + [p for d in own_dirs(dest, model_id) for p in files_under(d)]
    files += [dest / p for p in StPaths(model_id).triple()]  # the system test, rendered and recorded with the rest
    rejects = [p for p in files if p.suffix == ".rej"] + [p for p in (answers.with_name(answers.name + ".rej"),)
                                                           if p.is_file()]
    for path in files:
        if not path.is_file() or path.suffix == ".rej":
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        starts = [i for i, line in enumerate(lines, 1) if line.startswith("<<<<<<<")]
        ends = [i for i, line in enumerate(lines, 1) if line.startswith(">>>>>>>")]
        middles = [i for i, line in enumerate(lines, 1) if line.rstrip() == "======="]
        if (starts or ends) and (middles or (starts and ends)):
            count = max(len(starts), len(ends))
            found.append(Finding("error", f"{path.relative_to(dest)}:{(starts or ends)[0]} has merge-conflict "
                                 f"markers ({len(starts) or len(ends)} conflict{'s' if count > 1 else ''})",
                                 "resolve them (keep one side, delete the <<<<<<< ======= >>>>>>> lines)"))
    for path in rejects:
        target = path.with_suffix("")
        found.append(Finding("error", f"{path.relative_to(dest)}: a change that did not apply to "
                             f"{target.relative_to(dest)}", f"apply it by hand to {target.name}, then delete the .rej"))
    return found


# --- 7. revision, smoke ------------------------------------------------------------------------------------


def revision_findings(answers: dict[str, Any], fw: Framework, model_id: str) -> list[Finding]:
    recorded = checkout.recorded_revision(answers)
    current = fw.facts.get("revision") or ""
    if not recorded:
        return [Finding("info", "the answers record no framework revision (migrated by an older msmm-migrate)",
                        f"run the update to record it: {update_command(model_id)}")]
    if current and recorded != current:
        return [Finding("info", f"migrated against {_short(recorded)}, checkout is {_short(current)}",
                        f"run the update: {update_command(model_id)}")]
    return []


def _short(revision: str) -> str:
    return revision if revision.startswith("sha256:") else revision[:12]


def smoke_findings(dest: Path, answers_path: Path) -> list[Finding]:
    """Run the model's smoke in the checkout (REPORT.md left as is) and report its verdict, as the smoke's record
    (``smoke_result.json``) holds it."""
    from hooks.report.smoke import SmokeRecord, result_file
    from hooks.smoke.run import work_dir

    path = result_file(work_dir(answers_path.stem))
    path.unlink(missing_ok=True)  # never a previous run's verdict
    command = [sys.executable, "-m", "hooks.smoke", str(answers_path.relative_to(dest)), "--dest", str(dest),
               "--no-report"]
    done = subprocess.run(command, cwd=dest, env=env_with_hooks(), capture_output=True, text=True, check=False)
    record = SmokeRecord.read(path)
    rerun = f"re-run it: python -m hooks.smoke {answers_path.relative_to(dest)}"
    if record is None:  # it stopped before a verdict: its last line says why
        last = next((line.strip() for line in reversed((done.stdout + "\n" + done.stderr).splitlines())
                     if line.strip()), f"exit {done.returncode}")
        return [Finding("error", f"smoke failed: {last}", rerun)]
    if record.passed and done.returncode == 0:
        return [Finding("info", f"smoke passed: {record.summary}", "nothing to do")]
    where = f" (full log: {record.log})" if record.log else ""
    return [Finding("error", f"smoke failed: {record.summary}{where}", record.hint or rerun)]


