"""Data parity: does the data path feed ``forward`` what the model's own chat template and processor would?

A data branch can train with a healthy loss on the wrong format (other role markers, another
media-token count, a different end-of-turn token, an untrained stop): the worst failure this tool
can let through. So every data path is checked over a whole batch against the model's own
processor (``hooks.data.batch`` runs inside the framework's environment and says what is compared),
and the data branch is *chosen* by that check:

- candidates, in order: the in-repo templates MindSpeed-MM has for the model's family (branch a),
  then the template derived from the model's own chat template (branch b, ``hooks.data.chat_format``);
- at copy time, in a MindSpeed-MM checkout, each candidate is rendered as the copy would write it and
  checked in that order until one matches (``hooks.render.evidence``); the data-branch question's
  default is the first candidate that matched; none matching recommends branch c, with each
  candidate's first difference;
- after rendering, the generated scaffold itself (its YAML and plugins) is checked before the smoke
  (``parity_for_answers``); a mismatch stops the copy unless the ``parity_mismatch`` answer says warn.

Verdicts are cached under everything they depend on (the YAML's data section, the data-plugin code,
the model folder's non-weight files, the checkout's data code, the interpreter and its package
versions, this check's own code), so the copy-time run is reused after rendering when nothing moved.

``python -m hooks.data.parity .copier-answers/<model_id>.yml [--dest CHECKOUT]``
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hooks import TEMPLATE_ROOT, cache_root, env_with_hooks, scaffold
from hooks.data import MODEL_CODE_KINDS
from hooks.data.batch_spec import BatchSpec
from hooks.data.columns import for_data
from hooks.model.facts import ModelFacts
from hooks.model.processor_facts import ChatSlots
from hooks.model.shrink import is_weight_file

ENV_PACKAGES = ("transformers", "tokenizers", "torch")  # what a verdict depends on besides the files
CHECK_CODE = tuple(TEMPLATE_ROOT / p for p in (  # the check's own code: a verdict is cached on it too
    "hooks/data/batch.py", "hooks/data/parity_samples.py", "hooks/data/framework_batches.py", "hooks/data/media.py",
    "partials/processor_media.py"))
DATA_PLUGIN_FILES = ("data_plugin_*.py", "processor_media.py", "dataset_*.py", "processor_dataset.py")
MODEL_CODE_FILES = ("modeling_*.py", "remote_code/*.py")  # the model plugin: data code in the code conventions

@dataclass
class ParityResult:
    """One candidate's verdict and what it rests on.

    "match" and "mismatch" (with the first difference) are evidence; "error" is "could not evaluate"
    with its cause, never evidence: it chooses no branch, and when the cause is the interpreter
    (``environment``: one line naming ``python`` or the package) the copy stops before rendering.
    """

    verdict: str
    details: list[str] = field(default_factory=list)
    candidate: str = ""
    environment: str = ""
    data_path_raises: bool = False  # the framework's own data path raised on a sample: it cannot be built
    samples: list[str] = field(default_factory=list)  # the samples compared, in order (a match covers all of them)

    @property
    def ok(self) -> bool:
        return self.verdict == "match"

    def summary(self) -> str:
        head = f"data parity: {self.verdict.upper()}" + (f" ({self.candidate})" if self.candidate else "")
        compared = [f"compared: {', '.join(self.samples)}"] if self.ok and self.samples else []
        return "\n".join([head] + [f"  {d}" for d in compared + self.details])

    def first_difference(self) -> str:
        """What made it fail: the check stops at the first difference, which is its last detail."""
        return self.details[-1] if self.details and not self.ok else self.verdict

    def headline(self) -> str:
        """One line for a table: the first difference, or what a match rests on and its caveats."""
        if not self.ok:
            return self.first_difference()
        caveats = [d for d in self.details if "not compared" in d or "default is" in d]
        return "; ".join(["ids, label mask and media inputs equal on every sample", *caveats])


def spec_for(facts: ModelFacts, trust_remote_code: bool) -> BatchSpec:
    """What the batch check needs to know of the model, from the frozen facts (its worker reads it as JSON)."""
    chat, form, media = facts.processor.chat_format or ChatSlots(), facts.processor.form, facts.processor.media_format
    return BatchSpec(forward_keys=facts.forward_params, forward_kwargs=facts.forward_accepts_kwargs,
                     # An answer is closed by the end-of-turn tokens, or by the template's own closing text without
                     # them (a template that reads string content only: the end of turn the sample format read off it).
                     end_of_turn=chat.end_of_turn or chat.assistant_post.strip() or form.end_of_turn,
                     sample_format=dict(facts.processor.sample_format or {}), string_roles=chat.string_roles,
                     trust_remote_code=trust_remote_code, media=facts.processor.taken_media(),
                     video=bool(media and media.video_item))


# --- configurations to check -------------------------------------------------------------------------


def data_plugin_files(config: dict[str, Any], dest: Path, scratch: Path | None = None, *,
                      model_code: bool = False) -> list[Path]:
    """The data-plugin code a verdict depends on: the derived template's files in a plugin of the YAML, and the
    model plugin's code where the samples come from it (``model_code``: the code, method and context
    conventions). A branch-b plugin beside the model plugin does not make the model code part of the verdict,
    so the copy-time evidence's verdict is reused after rendering."""
    patterns = DATA_PLUGIN_FILES + (MODEL_CODE_FILES if model_code else ())
    files: list[Path] = []
    for plugin in config.get("training", {}).get("plugin", []):
        for root in (dest, scratch):
            folder = Path(root) / plugin.replace(".", "/") if root else None
            if folder and folder.is_dir():
                files += [p for pattern in patterns for p in sorted(folder.glob(pattern))]
    return files


# --- running the check -------------------------------------------------------------------------------


def _check_env(dest: Path, mindspeed_home: Path | None, scratch: Path | None) -> dict[str, str]:
    """The framework's environment for the check, as a one-process trainer has it (no rank variables)."""
    from hooks.framework.environment import detect_device, framework_env

    env = env_with_hooks(framework_env(dest, mindspeed_home, cpu_bridges=detect_device() == "cpu"))
    if scratch is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(scratch), env["PYTHONPATH"]])
    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE"):
        env.pop(key, None)
    return env


def run_check(dest: Path, model_dir: Path, config: dict[str, Any], spec: BatchSpec, *, python: str,
              mindspeed_home: Path | None, scratch: Path | None = None, timeout_s: float = 900) -> ParityResult:
    """``python -m hooks.data.batch`` in the framework's environment (niced; gone when its caller is)."""
    import yaml

    from hooks.lifetime import die_with_parent

    with tempfile.TemporaryDirectory(prefix="msmm-parity-run-") as tmp:
        paths = {name: Path(tmp) / name for name in ("config.yaml", "spec.json", "out.json")}
        paths["config.yaml"].write_text(yaml.safe_dump(config), encoding="utf-8")
        paths["spec.json"].write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        cmd = [python, "-m", "hooks.data.batch", "--config", str(paths["config.yaml"]), "--model-dir",
               str(model_dir), "--spec", str(paths["spec.json"]), "--out", str(paths["out.json"])]

        def niced() -> None:
            os.nice(10)  # it may run beside the smoke, whose time the user waits for
            die_with_parent()

        try:
            done = subprocess.run(cmd, cwd=str(dest), env=_check_env(dest, mindspeed_home, scratch),
                                  capture_output=True, text=True, timeout=timeout_s, check=False, preexec_fn=niced)
        except subprocess.TimeoutExpired:
            return ParityResult("error", [f"the parity check ran past {timeout_s:.0f} s"])
        if not paths["out.json"].is_file():
            tail = (done.stdout[-1000:] + done.stderr[-2000:]).strip().splitlines()[-12:]
            return ParityResult("error", [f"the parity check failed (exit {done.returncode})", *tail])
        return result_from_payload(json.loads(paths["out.json"].read_text(encoding="utf-8")))


def result_from_payload(payload: dict[str, Any]) -> ParityResult:
    return ParityResult(payload["verdict"], list(payload.get("details", [])),
                        environment=payload.get("environment") or "",
                        data_path_raises=bool(payload.get("data_path_raises")),
                        samples=list(payload.get("samples", [])))


def check_in_this_process(dest: Path, model_dir: Path, config: dict[str, Any], spec: BatchSpec, *,
                          mindspeed_home: Path | None, scratch: Path | None) -> ParityResult:
    """``run_check`` without a new interpreter; it takes this process over (only a fork about to exit may)."""
    try:
        enter_framework(dest, mindspeed_home, scratch)
        from hooks.data.batch import batch_parity

        return result_from_payload(batch_parity(config, model_dir, spec))
    except Exception as err:  # noqa: BLE001 - an error verdict is not cached: postgen then reruns the check
        from hooks.data.framework_batches import environment_cause

        return ParityResult("error", [f"could not evaluate: the parity check failed in the probe's process: "
                                      f"{type(err).__name__}: {err}"], environment=environment_cause(err, dest))


def enter_framework(dest: Path, mindspeed_home: Path | None, scratch: Path | None) -> None:
    """Give this process what ``run_check``'s subprocess gets: environment, ``sys.path``, cwd, CPU bridges."""
    import importlib.util

    from hooks.framework.environment import BRIDGES_DIR

    env = _check_env(dest, mindspeed_home, scratch)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:0] = [path for path in env["PYTHONPATH"].split(os.pathsep) if path]
    sys.dont_write_bytecode = True  # an abandoned copy must leave the checkout untouched
    os.chdir(dest)
    if env.get("MSMM_CPU_BRIDGES") == "1" or env.get("MSMM_FULLY_SHARD_STANDIN") == "1":
        spec = importlib.util.spec_from_file_location("msmm_cpu_bridges", BRIDGES_DIR / "sitecustomize.py")
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))


# --- cache --------------------------------------------------------------------------------------------


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def parity_key(dest: Path, model_dir: Path, config: dict[str, Any], plugin_files: list[Path],
               spec: BatchSpec, python: str) -> str:
    """Everything a verdict depends on in files and settings (weights excluded: the check never reads them)."""
    dest, model_dir = Path(dest).resolve(), Path(model_dir).resolve()
    data = json.loads(json.dumps(config.get("data", {})))
    basic = data.get("dataset_param", {}).get("basic_parameters", {})
    for key in ("dataset", "dataset_dir", "cache_dir", "preprocessing_num_workers", "max_samples"):
        basic.pop(key, None)
    parts = [json.dumps(data, sort_keys=True), json.dumps(spec.to_dict(), sort_keys=True), python, str(dest),
             str(model_dir)]
    parts += [hashlib.sha256(p.read_bytes()).hexdigest() for p in (*CHECK_CODE, *plugin_files)]
    model_files = sorted(p for p in model_dir.iterdir() if p.is_file() and not is_weight_file(p.name))
    parts += [_stamp(p) for p in (*model_files, *sorted((dest / "mindspeed_mm" / "fsdp" / "data").rglob("*.py")))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _cache_dir() -> Path:
    return cache_root() / "parity"


def _env_versions() -> dict[str, str]:
    versions = {}
    for name in ENV_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = ""
    return versions


def load_cached_verdict(key: str) -> ParityResult | None:
    try:
        stored = json.loads((_cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return ParityResult(**stored["result"]) if stored.get("env") == _env_versions() else None  # older: no samples


def store_verdict(key: str, result: ParityResult) -> None:
    """Atomically, and only verdicts (an error may be transient, so it is never reused)."""
    if result.verdict == "error":
        return
    target = _cache_dir() / f"{key}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"env": _env_versions(), "result": asdict(result)}))
    partial.replace(target)


# --- copy time: evidence for the data-branch question ----------------------------------------------


def parity_for_answers(dest: Path, answers: dict[str, Any]) -> tuple[ParityResult | None, str]:
    """Check the generated scaffold in checkout ``dest``; (None, why) when the check cannot run here."""
    import yaml

    from hooks.framework.environment import framework_unavailable

    why, mindspeed_home = framework_unavailable(dest)
    if why:
        return None, why
    branch = answers.get("data_branch")
    facts = ModelFacts.from_dict(answers["model_facts"])
    sample_format = dict(facts.processor.sample_format or {})
    sample_kind = facts.processor.form.kind
    model_code = sample_kind in MODEL_CODE_KINDS
    if branch == "c" and sample_kind not in ("chat", "template") and not model_code:
        return None, (f"branch c with the processor's {sample_kind or 'own'} convention: the processor itself writes "
                      "the prompt and labels, so there is no second format to compare with")
    model_id = answers["model_id"]
    config = yaml.safe_load((dest / scaffold.config_yaml(model_id)).read_text())
    config["training"]["plugin"] = [p for p in config["training"]["plugin"]  # the model's data code stays
                                    if not p.rstrip("/").endswith(str(scaffold.model_plugin_dir(model_id))) or
                                    branch == "b" or model_code]
    spec = spec_for(facts, bool(answers.get("trust_remote_code")))
    if branch == "c":  # branches a and b are checked as the copy-time evidence checked them: its verdict is reused
        # branch c's records carry images (the field mapping has no video yet), read through data_fields, not the
        # huggingface columns the YAML maps
        spec = replace(spec, video=False, branch=branch, model_id=model_id, sample_format=sample_format)
    else:
        spec = for_data(spec, answers.get("data_json"))
    python = os.path.expanduser(answers.get("python") or sys.executable)
    model_dir = Path(os.path.expanduser(answers["model_path"])).resolve()
    key = parity_key(dest, model_dir, config, data_plugin_files(config, dest, model_code=model_code), spec, python)
    result = load_cached_verdict(key)
    if result is None:
        result = run_check(dest, model_dir, config, spec, python=python, mindspeed_home=mindspeed_home)
        store_verdict(key, result)
    own = {"code": ("your sample builder and the model's own conversation and chat()" if sample_format.get("builder")
                    else "the model's own data code and chat()"),
           "method": f"the model's own {sample_format.get('method')}(), as its model card calls it",
           "context": "the model's own make_context() and chat()",
           "recipe": ("your prompt builder, what it hands generate" if sample_format.get("builder") else
                      f"the model's own processor.{sample_format['processor_method']}(), what it hands "
                      f"{sample_format['generate_method']}()" if sample_format.get("processor_method") else
                      "the model card's quick-start code, what it hands generate"),
           "template": "the model's processor and its own chat-template call, as its model card calls it"}.get(
        sample_kind, "the model's processor and chat template")
    result.candidate = {"a": f"in-repo template {answers.get('chat_template')!r}",
                        "c": f"the dataset plugin ({own})"}.get(
        branch, "the template derived from the model's own chat template")
    return result, ""


def main(argv: list[str] | None = None) -> int:
    """CLI: exit 0 for match or when the check cannot run here, 1 for mismatch, 2 for error."""
    from hooks import load_answers

    parser = argparse.ArgumentParser(prog="python -m hooks.data.parity", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, help=".copier-answers/<model_id>.yml in the checkout")
    parser.add_argument("--dest", type=Path, default=Path.cwd(), help="checkout root (default: cwd)")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    answers = load_answers(args.answers if args.answers.is_absolute() else dest / args.answers)
    result, why = parity_for_answers(dest, answers)
    if result is None:
        print(f"data parity: cannot run here: {why}")
        return 0
    print(result.summary())
    if result.environment:
        print(f"error: {result.environment}")
    return {"mismatch": 1, "error": 2}.get(result.verdict, 0)


if __name__ == "__main__":
    raise SystemExit(main())
