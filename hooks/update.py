"""``python -m hooks.update [CHECKOUT]``: carry every migrated model of a checkout to the current template and
to the framework the checkout holds now, as one diff a reviewer reads; ``--review`` prints it and changes nothing
(``--copy TEMPLATE -d key=value ...`` prints the diff a new copy would make, the same way).

A command around ``copier update``, for three things copier does not do by itself:

* **Framework facts.** copier renders the old and the new template version in temporary folders, where the
  checkout's framework files are absent: facts read there are the pinned ones, so after a framework upgrade an
  update would change nothing. This command reads the facts from the checkout (``hooks.framework.checkout``) and
  passes them as the ``framework`` answer: copier's replay of the old version uses the facts recorded at the
  last copy or update, the new render the live ones, and its 3-way merge keeps the user's edits.
* **Several models.** copier refuses a dirty tree, and after one model's update the tree is dirty. The updates
  run one after another in a scratch clone of the checkout (committed there after each), and their combined
  diff is applied to the checkout once, uncommitted; its history is not touched. ``--review`` prints that same
  diff instead, so what it shows is what ``git diff`` shows after the update.
* **Conflicts.** copier exits 0 with ``<<<<<<<`` markers left in files; here they are listed per model and the
  exit status is non-zero.
* **Unfinished updates.** On a dirty tree nothing runs; where migrated models' files changed (what a copier run
  stopped between its render and its merge leaves, without the user's edits) it prints the git commands that bring
  the last commit's files back (``recovery``), never "commit".

After applying, ``hooks.check`` runs on the checkout and each updated model's smoke (unless ``--no-smoke``, or
the model's answers say ``run_smoke: false``);
one table row per model: framework revision old -> new, template version old -> new, files changed,
conflicts, check, smoke, and the smoke's losses against the model's recorded system-test baseline
(``tests/st/baseline_results/finetune_<id>.json``: the largest relative difference, within the comparator's 1 %
or not). A loss regression makes the exit status non-zero and names the model and the first step that moved.
``--review`` runs the smokes in the scratch clone, so it shows that comparison too and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from hooks import env_with_hooks, scaffold
from hooks.framework import checkout
from hooks.render import stale
from hooks.terminal import echo, terminal_width

_GIT_ID = ["-c", "user.name=msmm-migrate", "-c", "user.email=msmm-migrate@localhost", "-c", "commit.gpgsign=false"]


@dataclass
class Row:
    """What the update did to one model."""

    model: str
    old_revision: str = ""
    new_revision: str = ""
    old_version: str = ""
    new_version: str = ""
    changed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    error: str = ""
    check: str = ""
    smoke: str = ""
    losses: str = ""  # the smoke's losses vs the recorded baseline (hooks.smoke.baseline.Comparison.line)
    regressed: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.error or self.conflicts or self.check.startswith("error") or self.smoke.startswith("FAIL")
                    or self.regressed)


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *_GIT_ID, *args], input=stdin, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} failed in {repo}: {done.stderr.strip()[-500:]}")
    return done.stdout


def tree_error(dest: Path) -> str:
    """Why the checkout cannot be updated as it is ("" when it can): copier needs a clean git work tree. Where the
    changes touch migrated models' files, how to get the committed files back (``recovery``), never "commit"."""
    done = subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "-z", "--no-renames",
                           "--untracked-files=all"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"{dest} is not a git work tree: copier update needs one (git init && git add -A && git commit)"
    changed = {entry[3:]: entry[:2] == "??" for entry in done.stdout.split("\0") if entry}
    if changed:
        return (recovery(dest, changed) or f"{dest} has uncommitted changes: commit or stash them first (copier "
                "update needs a clean tree)")
    _applied_marker(dest).unlink(missing_ok=True)  # a clean tree: an applied update was committed or dropped
    return ""


def _owned(model_id: str) -> list[str]:
    """The paths a model's copy, update and smoke write (folders end with "/")."""
    st = scaffold.StPaths(model_id)
    folders = (scaffold.example_dir(model_id), scaffold.model_plugin_dir(model_id), scaffold.dataset_dir(model_id))
    files = (scaffold.answers_file(model_id), st.script, st.run_config, st.baseline, st.provenance)
    return [*(f"{p}/" for p in folders), *map(str, files)]


def _applied_marker(dest: Path) -> Path:
    """Where ``main`` notes, before applying an update, the commit it applies it on (in the git folder, never in
    the work tree): a later run that finds the tree dirty on that same commit knows the changes are its own."""
    done = subprocess.run(["git", "-C", str(dest), "rev-parse", "--git-path", "msmm-update-applied"],
                          capture_output=True, text=True, check=False)
    return dest / done.stdout.strip() if done.returncode == 0 else dest / ".git" / "msmm-update-applied"


def recovery(dest: Path, changed: dict[str, bool]) -> str:
    """What to do with uncommitted changes to migrated models' files (``changed``: path -> untracked), "" when
    none are.

    Such changes are what an update that did not finish leaves (or edits not committed yet): copier renders
    the new version over the model's files first and applies the user's edits to it last, so a run stopped in
    between (or an older plain ``copier update`` that refused after its render) leaves the files without the
    user's committed edits; committing them would make that loss permanent. The last commit still has the
    files: the message gives the commands that show the changes and set them aside. Changes ``main`` applied
    itself (the marker names this commit) are a finished update not committed yet: review and commit, or set
    it aside the same way."""
    prefixes = [p for answers in sorted((dest / scaffold.ANSWERS_DIR).glob("*.yml")) for p in _owned(answers.stem)]
    ours = sorted(f for f in changed if any(f == p or (p.endswith("/") and f.startswith(p)) for p in prefixes))
    if not ours:
        return ""
    tracked = [f for f in ours if not changed[f]]
    marker = _applied_marker(dest)
    head = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip()
    applied = marker.is_file() and marker.read_text(encoding="utf-8").strip() == head
    names = " ".join(ours)
    others = sorted(set(changed) - set(ours))
    what = (" that hold the update python -m hooks.update applied on this commit (not committed yet; its check or "
            "smoke may not have finished): review it and commit it (git add -A && git commit), or set it aside and "
            "run the update again" if applied else
            ", as an update that did not finish leaves them (copier renders a model's files first and merges your "
            "committed edits into them last: a run stopped in between leaves the files without your edits); "
            "committing them as they are could make that loss permanent, and your last commit still has every file "
            "as it was")
    lines = [f"{dest} has uncommitted changes to migrated models' files{what}:",
             *([f"  git diff -- {' '.join(tracked)}    # what changed since your last commit"] if tracked else []),
             f"  git stash push --include-untracked -- {names}    # back to your last commit (the changes kept in "
             "the stash: git stash drop discards them)",
             *([f"  other uncommitted changes ({', '.join(others)}): commit or stash them too"] if others else []),
             f"  then: PYTHONPATH=<msmm-migrate> python -m hooks.update {dest}"
             + ("" if applied else " (if the changes are new edits of your own, commit them instead, then run it)")]
    return "\n".join(lines)


def _answers(path: Path) -> dict:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def conflicted(root: Path, files: list[str]) -> list[str]:
    """Files left with merge-conflict markers (or copier's ``.rej`` files)."""
    found = []
    for name in files:
        path = root / name
        if name.endswith(".rej"):
            found.append(name)
        elif path.is_file():
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            if any(line.startswith(("<<<<<<< ", ">>>>>>> ")) for line in lines):
                found.append(name)
    return found


def update_model(clone: Path, answers_rel: str, facts: dict, vcs_ref: str | None = None) -> Row:
    """``copier update`` of one model in ``clone`` against ``facts``, committed there; what changed."""
    old = _answers(clone / answers_rel)
    row = Row(model=Path(answers_rel).stem, old_revision=checkout.recorded_revision(old),
              new_revision=str(facts.get("revision", "")), old_version=str(old.get("_commit", "")))
    cmd = [sys.executable, "-m", "copier", "update", "--trust", "--defaults", "--skip-tasks", "--quiet",
           "--conflict", "inline", "-a", answers_rel, "-d", f"framework={json.dumps(facts)}"]
    env = {**env_with_hooks(), stale.UNDER_HOOKS_UPDATE: "1"}  # the live facts are passed: no stale stop
    done = subprocess.run([*cmd, *(["--vcs-ref", vcs_ref] if vcs_ref else [])], cwd=clone, capture_output=True,
                          text=True, env=env, check=False)
    if done.returncode != 0:
        _git(clone, "reset", "-q", "--hard")
        _git(clone, "clean", "-qfd")
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        row.error = lines[-1] if lines else f"copier update exited with {done.returncode}"
        return row
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "--allow-empty", "--no-verify", "-m", f"msmm-migrate: update {row.model}")
    row.changed = [f for f in _git(clone, "diff", "--name-only", "HEAD~1", "HEAD").splitlines() if f]
    row.conflicts = conflicted(clone, row.changed)
    row.new_version = str(_answers(clone / answers_rel).get("_commit", "")) or "(conflicted)"
    return row


def update_all(dest: Path, *, models: list[str] | None = None, vcs_ref: str | None = None,
               review_smoke: bool = False) -> tuple[list[Row], str]:
    """Every model's update in a scratch clone of ``dest``; the rows and the combined diff (``dest`` untouched).

    ``review_smoke``: also run each model's smoke in the clone (REPORT.md there left as is), so a review shows
    the losses against the recorded baselines without changing the checkout."""
    facts = checkout.facts(dest)
    answers = sorted((dest / scaffold.ANSWERS_DIR).glob("*.yml"))
    answers = [a for a in answers if not models or a.stem in models]
    with tempfile.TemporaryDirectory(prefix="msmm-update-") as tmp:
        clone = Path(tmp) / "checkout"
        subprocess.run(["git", "clone", "-q", str(dest), str(clone)], check=True, capture_output=True)
        base = _git(clone, "rev-parse", "HEAD").strip()
        rows = [update_model(clone, f"{scaffold.ANSWERS_DIR}/{a.name}", facts, vcs_ref) for a in answers]
        diff = _git(clone, "diff", "--binary", base, "HEAD")
        if review_smoke:
            for row in rows:
                _smoke(clone, row, report=False)
    return rows, diff


def copy_diff(dest: Path, template: str, data: list[str]) -> tuple[str, str]:
    """The diff ``copier copy`` with ``data`` would make in ``dest`` (rendered in a scratch clone, no tasks: the
    smoke's report and copied remote code are not in it), and copier's error ("" when it rendered)."""
    with tempfile.TemporaryDirectory(prefix="msmm-review-") as tmp:
        clone = Path(tmp) / "checkout"
        subprocess.run(["git", "clone", "-q", str(dest), str(clone)], check=True, capture_output=True)
        args = [arg for pair in data for arg in ("-d", pair)]
        done = subprocess.run([sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet",
                               "--skip-tasks", *args, template, str(clone)], capture_output=True, text=True,
                              env=env_with_hooks(), check=False)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            return "", lines[-1] if lines else f"copier copy exited with {done.returncode}"
        _git(clone, "add", "-A")
        return _git(clone, "diff", "--cached", "--binary"), ""


def _check_and_smoke(dest: Path, rows: list[Row], smoke: bool) -> None:
    """``hooks.check`` per model, then each sound model's smoke (its verdict line, its losses vs the baseline)."""
    from hooks.check import check

    findings, _ = check(dest)
    for row in rows:
        errors = [f for f in findings if f.model == row.model and f.level == "error"]
        row.check = f"error ({len(errors)}: {errors[0].what})" if errors else "ok"
        if smoke:
            _smoke(dest, row)
        else:
            row.smoke = "skipped"


def _smoke(dest: Path, row: Row, *, report: bool = True) -> None:
    """The model's smoke in ``dest`` (unless its answers say ``run_smoke: false`` or the update failed): the verdict,
    and its losses against the system test's recorded baseline (``hooks.report.st`` compares them in the smoke and
    leaves the comparison in ``smoke_result.json``)."""
    from hooks.report.smoke import SmokeRecord, result_file
    from hooks.smoke.run import work_dir

    wanted = _answers(dest / scaffold.answers_file(row.model)).get("run_smoke", True) is not False
    if not wanted or row.failed:
        row.smoke = "skipped" if not wanted else "not run"
        return
    path = result_file(work_dir(row.model))
    path.unlink(missing_ok=True)  # never a previous run's figures
    done = subprocess.run([sys.executable, "-m", "hooks.smoke", str(scaffold.answers_file(row.model)), "--dest",
                           str(dest), *([] if report else ["--no-report"])], cwd=dest, capture_output=True, text=True,
                          env=env_with_hooks(), check=False)
    record = SmokeRecord.read(path)
    if record is None:  # the smoke stopped before it had a verdict: its own last words say why
        row.smoke, row.losses = f"FAIL ({done.stderr.strip()[-300:] or done.stdout.strip()[-300:]})", "not compared"
        return
    row.regressed = record.regressed
    if record.baseline:
        row.losses = record.baseline.line()
    elif record.recorded:
        row.losses = "none before: recorded by this smoke"
    else:
        row.losses = (record.st or "not compared").removeprefix("system test: ")
    only_losses = record.regressed and "losses moved from the recorded baseline" in record.summary  # else its cause
    row.smoke = "PASS" if record.passed else "FAIL (loss regression)" if only_losses else f"FAIL ({record.summary})"


def table(rows: list[Row]) -> str:
    """One line per model, aligned."""
    head = ("model", "framework", "template", "files", "conflicts", "check", "smoke", "losses vs baseline")
    body = [(r.model, f"{_short(r.old_revision)} -> {_short(r.new_revision)}", f"{r.old_version} -> {r.new_version}",
             str(len(r.changed)), ", ".join(r.conflicts) or ("-" if not r.error else r.error), r.check or "-",
             r.smoke or "-", r.losses or "-") for r in rows]
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)), line[-1]]).rstrip()
                     for line in (head, *body))


def print_table(rows: list[Row], out: TextIO) -> None:
    """The table, or at a terminal too narrow for it one wrapped paragraph per model (never a word split)."""
    text, width = table(rows), terminal_width(out)
    if width is None or max(len(line) for line in text.splitlines()) <= width:
        print(text, file=out)
        return
    head = ("framework", "template", "files changed", "conflicts", "check", "smoke", "losses vs baseline")
    for row in rows:
        values = (f"{_short(row.old_revision)} -> {_short(row.new_revision)}", f"{row.old_version} -> "
                  f"{row.new_version}", str(len(row.changed)), ", ".join(row.conflicts) or row.error or "-",
                  row.check or "-", row.smoke or "-", row.losses or "-")
        echo(f"{row.model}: " + "; ".join(f"{name} {value}" for name, value in zip(head, values, strict=True)),
             file=out)


def _regressions(rows: list[Row], out: TextIO) -> None:
    """One line per model whose losses left the baseline's tolerance: the model and the first step that moved."""
    for row in rows:
        if row.regressed:
            echo(f"loss regression: {row.model}: {row.losses} ({scaffold.StPaths(row.model).baseline}; "
                 "if the change is intended, re-record it: python -m hooks.smoke "
                 f"{scaffold.answers_file(row.model)} --record-baseline)", file=out)


def _short(revision: str) -> str:
    return (revision[:8] if len(revision) == 40 else revision) or "(none)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.update", description=__doc__.splitlines()[0])
    parser.add_argument("checkout", nargs="?", type=Path, default=Path.cwd(), help="MindSpeed-MM checkout (cwd)")
    parser.add_argument("--model", action="append", help="only this model id (repeatable)")
    parser.add_argument("--review", action="store_true", help="print the diff the update would make; change nothing")
    parser.add_argument("--no-smoke", action="store_true", help="skip each model's smoke after the update")
    parser.add_argument("--vcs-ref", help="template version to update to (default: its latest tag)")
    parser.add_argument("--copy", metavar="TEMPLATE", help="review a new copy of TEMPLATE instead (with -d answers)")
    parser.add_argument("-d", "--data", action="append", default=[], metavar="KEY=VALUE",
                        help="an answer for --copy, as copier's -d")
    args = parser.parse_args(argv)
    dest = args.checkout.resolve()
    why = tree_error(dest)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    if args.copy:
        diff, error = copy_diff(dest, args.copy, args.data)
        if error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        sys.stdout.write(diff)
        return 0
    if not list((dest / scaffold.ANSWERS_DIR).glob("*.yml")):
        print(f"no migrated models in {dest} (no {scaffold.ANSWERS_DIR}/*.yml): nothing to update")
        return 0
    rows, diff = update_all(dest, models=args.model, vcs_ref=args.vcs_ref,
                            review_smoke=args.review and not args.no_smoke)
    if args.review:
        sys.stdout.write(diff)
        print_table(rows, sys.stderr)
        _regressions(rows, sys.stderr)
        return 1 if any(r.failed for r in rows) else 0
    if diff:
        _applied_marker(dest).write_text(_git(dest, "rev-parse", "HEAD"), encoding="utf-8")  # before: a crash too
        _git(dest, "apply", "--whitespace=nowarn", "-", stdin=diff)
    _check_and_smoke(dest, rows, smoke=not args.no_smoke)
    print_table(rows, sys.stdout)
    _regressions(rows, sys.stdout)
    conflicts = [f for r in rows for f in r.conflicts]
    if conflicts:
        echo(f"conflicts left in: {', '.join(conflicts)} (resolve the <<<<<<< markers, then python -m hooks.check)")
    print("review with git diff; commit when satisfied" if diff else "nothing changed")
    return 1 if any(r.failed for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
