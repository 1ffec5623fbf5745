"""Data parity: does MindSpeed-MM's huggingface data path speak the model's own chat format?

Branch a trains through a *registered* template + mm_plugin chosen by name. If that template
differs from the model's own chat template (other role markers, another image-token count,
a different end-of-turn token), training still runs and the loss still falls, but the model
learns a format it never sees at inference. This check encodes one chat sample with one image
both ways, in a subprocess that imports the real ``mindspeed_mm`` (CPU bridges where needed):

- MindSpeed-MM: ``load_tokenizer`` -> ``get_template_and_fix_tokenizer`` ->
  ``mm_plugin.process_messages`` -> ``process_token_ids`` -> ``encode_multiturn`` (as
  ``SupervisedDatasetProcessor`` does, default system prompt included, no truncation);
- reference: the model's own ``AutoProcessor.apply_chat_template(..., tokenize=True)``.

Verdicts: ``match`` (identical ids), ``compatible`` (same image-token count, same media and
answer tokens; other differences listed), ``mismatch`` (image-token count, media span or answer
tokens differ), ``error`` (the check itself could not run).

Results are cached under the inputs they depend on (template, interpreter, the model folder's
non-weight files, the checkout's data code, this script). That lets the probe, once its facts are
printed, hand its warm process (torch, transformers and the processor already loaded) to the check
for the recommended template (``fork_early_run``) while copier renders; the post-generation step
then picks the result up instead of competing with the smoke for the CPU.

``python -m hooks.data.parity .copier-answers/<model_id>.yml [--dest CHECKOUT] [--template NAME]``
``python -m hooks.data.parity --model-dir DIR --template NAME [--dest CHECKOUT]``
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SAMPLE_QUESTION = "What color is this?"
SAMPLE_ANSWER = "The image is red."
TEXT_LIMIT = 600  # characters of each decoded sequence kept in the result
CONTEXT_TOKENS = 4  # tokens of context on each side of a reported difference
MAX_DIFF_LINES = 12
_MARK = "PARITY_JSON "
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")
ENV_PACKAGES = ("transformers", "tokenizers", "torch")  # what the verdict depends on besides the files
EARLY_TIMEOUT_S = 300  # the forked early run's deadline; postgen's own check has its own timeout

# Runs inside framework_env (cwd = MindSpeed-MM root). Mirrors SupervisedDatasetProcessor._encode_data_example
# without truncation, records where the trained answer lies on both sides, and leaves it all in ``payload``.
_ENCODE = r'''
import gc, json, sys
gc.disable()  # short-lived: collecting during the torch/transformers imports frees nothing useful
from PIL import Image
model_dir, template_name, question, answer = sys.argv[1:5]
image = Image.new("RGB", (64, 64), (200, 30, 30))

from mindspeed_mm.fsdp.data.data_utils.func_utils.convert import load_tokenizer
from mindspeed_mm.fsdp.data.data_utils.func_utils.model_args import ProcessorArguments
from mindspeed_mm.fsdp.data.data_utils.func_utils.template import get_template_and_fix_tokenizer

module = load_tokenizer(ProcessorArguments(model_name_or_path=model_dir))
tokenizer, processor = module["tokenizer"], module["processor"]
template = get_template_and_fix_tokenizer(tokenizer, template_name)
messages = [{"role": "user", "content": "<image>" + question}, {"role": "assistant", "content": answer}]
messages = template.mm_plugin.process_messages(messages, [image], [], [], processor)
mm_ids, _ = template.mm_plugin.process_token_ids([], [], [image], [], [], tokenizer, processor)
(source, target), = template.encode_multiturn(tokenizer, messages, "", [])
answer_start = len(mm_ids) + len(source)
mm_ids = mm_ids + source + target
if template.efficient_eos:
    mm_ids.append(tokenizer.eos_token_id)

from transformers import AutoProcessor
own = AutoProcessor.from_pretrained(model_dir, local_files_only=True)
hf_user = {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": question}]}
hf_assistant = {"role": "assistant", "content": answer}  # plain text: what every chat template accepts
def encode(msgs, gen):
    # apply_chat_template(tokenize=True) needs list content in every turn, which some released templates
    # (GLM-4.1V) print verbatim for the assistant: render the text, then tokenize it the way it would.
    text = own.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
    bos = own.tokenizer.bos_token
    kwargs = {"add_special_tokens": False} if bos is not None and text.startswith(bos) else {}
    ids = own(text=[text], images=[image], **kwargs)["input_ids"]
    ids = ids.tolist() if hasattr(ids, "tolist") else ids
    return [int(i) for i in ids[0]]
ref_ids = encode([hf_user, hf_assistant], False)
ref_prompt = encode([hf_user], True)
image_token = getattr(template.mm_plugin, "image_token", None)
own_tok = own.tokenizer
pieces = {}
for i in set(mm_ids) | set(ref_ids):
    pieces[i] = own_tok.decode([i], skip_special_tokens=False)
payload = {
    "mm_ids": [int(i) for i in mm_ids], "mm_answer_start": answer_start,
    "ref_ids": ref_ids, "ref_prompt_ids": ref_prompt,
    "image_token": image_token,
    "terminator_ids": sorted({i for i in [tokenizer.eos_token_id, own_tok.eos_token_id]
                              + [own_tok.convert_tokens_to_ids(w) for w in (template.stop_words or [])]
                              if isinstance(i, int) and i != own_tok.unk_token_id}),
    "image_token_id": own_tok.convert_tokens_to_ids(image_token) if image_token else None,
    "pieces": {str(k): v for k, v in pieces.items()},
    "mm_text": tokenizer.decode(mm_ids, skip_special_tokens=False),
    "ref_text": own_tok.decode(ref_ids, skip_special_tokens=False),
}
'''
# As a subprocess (``python -c``) the script prints the payload and leaves without teardown.
_SCRIPT = _ENCODE + r'''
print("PARITY_JSON " + json.dumps(payload))
sys.stdout.flush()
import os
os._exit(0)  # hooks.exit_now, inlined (hooks is not on this path): skips ~1.5 s of teardown beside the smoke
'''


@dataclass
class ParityResult:
    """Outcome of one parity check: the verdict, why, and what each side produced (decoded, truncated)."""

    verdict: str  # match | compatible | mismatch | error
    details: list[str] = field(default_factory=list)
    mm_text: str = ""
    ref_text: str = ""
    diff_lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Training on this template teaches the model its own format (differences, if any, are benign)."""
        return self.verdict in ("match", "compatible")

    def summary(self) -> str:
        """Human-readable report: verdict, details, then the listed differences."""
        lines = [f"data parity: {self.verdict.upper()}"] + [f"  {d}" for d in self.details]
        if self.diff_lines:
            lines += ["  differences (MindSpeed-MM | model's own processor):"] + [f"    {d}" for d in self.diff_lines]
        return "\n".join(lines)


# --- pure comparison ------------------------------------------------------------------------------


def _span_of(ids: Sequence[int], token_id: int | None) -> tuple[int, int]:
    """[first, last] + one wrapper token each side (vision start/end): the media span both sides must share."""
    hits = [i for i, t in enumerate(ids) if t == token_id] if token_id is not None else []
    if not hits:
        return (0, 0)
    return (max(hits[0] - 1, 0), min(hits[-1] + 2, len(ids)))


def _strip_blank(ids: Sequence[int], decode: Callable[[Sequence[int]], str]) -> list[int]:
    """Drop whitespace-only tokens at both ends: where "\n" falls between prompt and answer is the full diff's job."""
    out = list(ids)
    while out and not decode(out[-1:]).strip():
        out.pop()
    while out and not decode(out[:1]).strip():
        out.pop(0)
    return out


def _drop_added_terminator(
    mm_answer: list[int], ref_answer: list[int], terminators: Collection[int]
) -> tuple[list[int], bool]:
    """MindSpeed-MM's answer minus a final stop token the model's template leaves to generation (GLM style).

    Training must teach the model to stop, so a trailing eos/stop word that the reference simply does
    not render is benign; a *different* stop token than the reference's is not.
    """
    if mm_answer and mm_answer[-1] in terminators and not (ref_answer and ref_answer[-1] in terminators):
        return mm_answer[:-1], True
    return mm_answer, False


def _show(ids: Sequence[int], start: int, end: int, decode: Callable[[Sequence[int]], str]) -> str:
    """Decoded ``ids[start:end]`` with context, as a repr so newlines and special tokens stay visible."""
    lo, hi = max(start - CONTEXT_TOKENS, 0), min(end + CONTEXT_TOKENS, len(ids))
    return f"...{decode(ids[lo:start])!r} [{decode(ids[start:end])!r}] {decode(ids[end:hi])!r}..."


def diff_lines(
    mm_ids: Sequence[int], ref_ids: Sequence[int], decode: Callable[[Sequence[int]], str]
) -> list[str]:
    """Each differing region of the two id sequences, decoded on both sides with a little context."""
    matcher = difflib.SequenceMatcher(a=list(mm_ids), b=list(ref_ids), autojunk=False)
    lines = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        lines.append(f"{op} at token {a0}|{b0}: {_show(mm_ids, a0, a1, decode)} | {_show(ref_ids, b0, b1, decode)}")
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... {len(lines) - MAX_DIFF_LINES} more"]
    return lines


def first_divergence(mm_ids: Sequence[int], ref_ids: Sequence[int], decode: Callable[[Sequence[int]], str]) -> str:
    """Where the two sequences first part, decoded on both sides (the quickest pointer for a user)."""
    n = answer_start(mm_ids, ref_ids)  # length of the common prefix
    return (f"first divergence at token {n}: MindSpeed-MM {_show(mm_ids, n, n + CONTEXT_TOKENS, decode)} vs "
            f"model {_show(ref_ids, n, n + CONTEXT_TOKENS, decode)}")


def compare_ids(
    mm_ids: Sequence[int],
    ref_ids: Sequence[int],
    *,
    image_token_id: int | None,
    mm_answer_start: int,
    ref_answer_start: int,
    decode: Callable[[Sequence[int]], str],
    terminator_ids: Collection[int] = (),
) -> ParityResult:
    """Judge MindSpeed-MM's ids against the model's own: what training would feed vs what inference expects.

    The image-token count must agree (the model scatters exactly that many image features), the
    media span (image tokens with their wrappers) and the trained answer (from its start to the end,
    trailing whitespace ignored) must be identical; anything else is listed but tolerated.
    """
    mm_ids, ref_ids = list(mm_ids), list(ref_ids)
    n_mm, n_ref = mm_ids.count(image_token_id), ref_ids.count(image_token_id)
    details = [f"image tokens: MindSpeed-MM {n_mm}, model {n_ref}",
               f"sequence length: MindSpeed-MM {len(mm_ids)}, model {len(ref_ids)}"]
    if mm_ids == ref_ids:
        return ParityResult("match", details + ["token ids identical"])
    lines = diff_lines(mm_ids, ref_ids, decode)
    details.append(first_divergence(mm_ids, ref_ids, decode))
    problems = []
    if n_mm != n_ref or image_token_id is None:
        problems.append("image-token count differs: the model's image-feature count would not match its input")
    (a0, a1), (b0, b1) = _span_of(mm_ids, image_token_id), _span_of(ref_ids, image_token_id)
    if mm_ids[a0:a1] != ref_ids[b0:b1]:
        problems.append(f"media span differs: {decode(mm_ids[a0:a1])[:80]!r} vs {decode(ref_ids[b0:b1])[:80]!r}")
    mm_answer = _strip_blank(mm_ids[mm_answer_start:], decode)
    ref_answer = _strip_blank(ref_ids[ref_answer_start:], decode)
    details.append(f"trained answer: MindSpeed-MM {decode(mm_answer)!r}, model {decode(ref_answer)!r}")
    mm_answer, added = _drop_added_terminator(mm_answer, ref_answer, set(terminator_ids))
    if added:
        details.append("MindSpeed-MM ends the answer with a stop token the model's template leaves to generation "
                       "(benign: it teaches the model to stop)")
    if mm_answer != ref_answer:
        problems.append(_answer_problem(decode(mm_answer), decode(ref_answer)))
    if problems:
        return ParityResult("mismatch", details + problems, diff_lines=lines)
    return ParityResult("compatible", details + ["differences lie outside the media and answer spans"],
                        diff_lines=lines)


def _answer_problem(mm_text: str, ref_text: str) -> str:
    """Why differing answer tokens matter, naming the usual cause (a Reasoning template's empty think block)."""
    why = "answer tokens differ: training would teach another reply format than inference uses"
    if "<think>" in mm_text and "<think>" not in ref_text:
        why += (" (MindSpeed-MM trains an empty <think></think> block before every answer: a Reasoning template "
                "with enable_thinking; use its *_nothink variant if registered, else a branch-b template)")
    return why


def answer_start(ids: Sequence[int], prompt_ids: Sequence[int]) -> int:
    """Where the reference answer starts: after the generation prompt (its common prefix with the full sample)."""
    n = 0
    for a, b in zip(ids, prompt_ids, strict=False):
        if a != b:
            break
        n += 1
    return n


def judge_payload(payload: dict[str, Any]) -> ParityResult:
    """Turn the subprocess's JSON into a verdict (kept separate so it is testable without MindSpeed-MM)."""
    pieces = {int(k): v for k, v in payload["pieces"].items()}

    def decode(ids: Sequence[int]) -> str:
        return "".join(pieces.get(i, f"<{i}>") for i in ids)

    result = compare_ids(
        payload["mm_ids"], payload["ref_ids"], image_token_id=payload["image_token_id"],
        mm_answer_start=payload["mm_answer_start"],
        ref_answer_start=answer_start(payload["ref_ids"], payload["ref_prompt_ids"]), decode=decode,
        terminator_ids=payload.get("terminator_ids", ()),
    )
    result.mm_text = payload["mm_text"][:TEXT_LIMIT]
    result.ref_text = payload["ref_text"][:TEXT_LIMIT]
    return result


# --- running it -----------------------------------------------------------------------------------


def _parse_output(stdout: str) -> dict[str, Any] | None:
    """The script's JSON line (the framework logs freely to stdout, so look for the marker)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    return None


def check_parity(
    mm_home: Path,
    model_dir: Path,
    template: str,
    *,
    mindspeed_home: Path | None = None,
    python: str = sys.executable,
    timeout_s: float = 600,
) -> ParityResult:
    """Encode one image+chat sample through MindSpeed-MM's data path and the model's processor; compare."""
    env = _script_env(Path(mm_home), mindspeed_home)
    cmd = [python, "-c", _SCRIPT, str(Path(model_dir).resolve()), template, SAMPLE_QUESTION, SAMPLE_ANSWER]
    try:
        # Niced: after copier it runs beside the smoke, whose wall time the user waits for.
        done = subprocess.run(cmd, cwd=str(mm_home), env=env, capture_output=True, text=True, timeout=timeout_s,
                              check=False, preexec_fn=_niced_child)
    except subprocess.TimeoutExpired:
        return ParityResult("error", [f"parity script ran past {timeout_s:.0f} s"])
    payload = _parse_output(done.stdout)
    if done.returncode != 0 or payload is None:
        tail = (done.stdout[-1500:] + done.stderr[-3000:]).strip().splitlines()[-25:]
        return ParityResult("error", [f"parity script failed (exit {done.returncode})"] + tail)
    return _verdict(payload, template, model_dir)


def _niced_child() -> None:
    """``preexec_fn`` of the check: niced (it runs beside the smoke) and gone when its caller is."""
    from hooks.lifetime import die_with_parent

    os.nice(10)
    die_with_parent()


def _script_env(mm_home: Path, mindspeed_home: Path | None) -> dict[str, str]:
    """The framework's environment for the script, as one rank of one."""
    from hooks.smoke.framework import detect_device, framework_env

    env = framework_env(mm_home, mindspeed_home, cpu_bridges=detect_device() == "cpu")
    env.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1")
    return env


def _verdict(payload: dict[str, Any], template: str, model_dir: Path) -> ParityResult:
    result = judge_payload(payload)
    result.details.insert(0, f"template {template!r} vs {Path(model_dir).name}'s own chat template")
    return result


# --- cache and early start ---------------------------------------------------------------------


def parity_key(dest: Path, model_dir: Path, template: str, python: str) -> str:
    """Everything the verdict depends on in files: template, interpreter, model folder, checkout data code.

    Sizes and mtimes stand for contents (weights excluded: the check never reads them); the
    interpreter's package versions are checked separately when a result is read.
    """
    dest, model_dir = Path(dest).resolve(), Path(model_dir).resolve()
    model_files = sorted(p for p in model_dir.iterdir() if p.is_file() and not p.name.endswith(WEIGHT_SUFFIXES))
    data_code = sorted((dest / "mindspeed_mm" / "fsdp" / "data").rglob("*.py"))
    parts = [template, python, str(dest), str(model_dir), hashlib.sha256(_SCRIPT.encode()).hexdigest()]
    for path in model_files + data_code:
        stat = path.stat()
        parts.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _cache_dir() -> Path:
    from hooks import cache_root

    return cache_root() / "parity"


def _env_versions() -> dict[str, str]:
    versions = {}
    for name in ENV_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = ""
    return versions


def _load_cached(key: str) -> ParityResult | None:
    try:
        stored = json.loads((_cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    if stored.get("env") != _env_versions():
        return None
    return ParityResult(**stored["result"])


def _store(key: str, result: ParityResult) -> None:
    """Atomically, and only verdicts (an error may be transient, so it is never reused)."""
    if result.verdict == "error":
        return
    target = _cache_dir() / f"{key}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"env": _env_versions(), "result": asdict(result)}))
    partial.replace(target)


def _early_run_pid(key: str) -> int | None:
    """The pid of another live process computing ``key`` (the probe's fork, ``fork_early_run``), else None."""
    from hooks.lifetime import pid_alive

    try:
        pid = int((_cache_dir() / f"{key}.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def _wait_for_early_run(key: str, timeout_s: float) -> ParityResult | None:
    deadline = time.monotonic() + timeout_s
    while _early_run_pid(key) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    return _load_cached(key)


def cached_parity(
    dest: Path,
    model_dir: Path,
    template: str,
    *,
    mindspeed_home: Path | None = None,
    python: str = sys.executable,
    timeout_s: float = 600,
) -> ParityResult:
    """``check_parity``, reusing the result for the same inputs or the one an early run is computing."""
    key = parity_key(dest, model_dir, template, python)
    result = _load_cached(key) or _wait_for_early_run(key, timeout_s)
    if result is None:
        result = check_parity(dest, model_dir, template, mindspeed_home=mindspeed_home, python=python,
                              timeout_s=timeout_s)
        _store(key, result)
    return result


def _enter_framework(mm_home: Path, mindspeed_home: Path | None) -> None:
    """Give this process what ``check_parity``'s subprocess gets: environment, ``sys.path``, cwd, CPU bridges."""
    import importlib.util

    from hooks.smoke.framework import BRIDGES_DIR

    env = _script_env(Path(mm_home), mindspeed_home)
    os.environ.update(env)
    sys.path[:0] = [path for path in env["PYTHONPATH"].split(os.pathsep) if path]
    sys.dont_write_bytecode = True  # an abandoned copy must leave the checkout untouched
    os.chdir(mm_home)
    if env.get("MSMM_CPU_BRIDGES") == "1":
        spec = importlib.util.spec_from_file_location("msmm_cpu_bridges", BRIDGES_DIR / "sitecustomize.py")
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))


def check_parity_in_this_process(
    mm_home: Path, model_dir: Path, template: str, *, mindspeed_home: Path | None = None
) -> ParityResult:
    """``check_parity`` without a new interpreter: the same script, run here.

    It takes this process over (environment, ``sys.path``, working directory), so only a process
    about to exit may call it: the forked early run.
    """
    argv = sys.argv
    try:
        _enter_framework(Path(mm_home), mindspeed_home)
        sys.argv = ["parity", str(Path(model_dir).resolve()), template, SAMPLE_QUESTION, SAMPLE_ANSWER]
        scope: dict[str, Any] = {"__name__": "__msmm_parity__"}
        exec(compile(_ENCODE, "<msmm parity>", "exec"), scope)  # noqa: S102 - our own script, as python -c runs it
        return _verdict(scope["payload"], template, model_dir)
    except Exception as err:  # noqa: BLE001 - an error verdict is not cached: postgen then reruns the check
        return ParityResult("error", [f"parity check failed in the probe's process: {type(err).__name__}: {err}"])
    finally:
        sys.argv = argv


def _detach() -> None:
    """Own session, no inherited pipes (copier stops waiting when the probe exits), low priority, a deadline."""
    import signal

    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.nice(10)  # it runs beside copier's rendering and the smoke's start
    signal.alarm(EARLY_TIMEOUT_S)  # a hung run dies: postgen stops waiting and runs the check itself


def fork_early_run(dest: Path, model_dir: Path, template: str, python: str) -> bool:
    """Run the check in a fork of this process (the probe's) and return at once; False when not started.

    The probe has just imported torch and transformers and loaded the model's processor: the
    child reuses all of it instead of a second interpreter importing them again beside the probe,
    which slowed the probe by ~1 s on a 2-core machine. The child publishes its pid for postgen to
    wait on, stores its verdict under the key postgen computes (``python`` is the interpreter
    answer, as postgen reads it) and exits. It writes no bytecode: an abandoned copy leaves the
    checkout untouched.
    """
    from hooks.smoke.framework import framework_unavailable

    dest, model_dir = Path(dest).resolve(), Path(model_dir).resolve()
    why, mindspeed_home = framework_unavailable(dest)
    if why or not hasattr(os, "fork"):
        return False
    key = parity_key(dest, model_dir, template, python)
    if _load_cached(key) is not None or _early_run_pid(key) is not None:
        return False
    pid_file = _cache_dir() / f"{key}.pid"
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        pid_file.write_text(str(pid))
        return True
    try:
        from hooks.lifetime import follow_owner

        _detach()
        follow_owner()  # copier's process: a copy that ends early takes this check with it
        _store(key, check_parity_in_this_process(dest, model_dir, template, mindspeed_home=mindspeed_home))
    finally:
        pid_file.unlink(missing_ok=True)
        os._exit(0)


def _resolve_template(answers: dict[str, Any], override: str | None) -> str | None:
    """The registered template to check: ``--template``, else branch a's ``chat_template`` answer."""
    if override:
        return override
    if answers.get("data_branch", "a") == "a":
        return answers.get("chat_template") or None
    return None


def parity_for_answers(
    dest: Path, answers: dict[str, Any], template: str | None = None
) -> tuple[ParityResult | None, str]:
    """Run the check for a generated model in checkout ``dest``; (None, why) when it cannot run here."""
    from hooks.smoke.framework import framework_unavailable

    template = _resolve_template(answers, template)
    why, mindspeed_home = framework_unavailable(dest)
    if not why and template is None:
        why = f"no registered template to check for data branch {answers.get('data_branch')} (use --template)"
    if why:
        return None, why
    python = os.path.expanduser(answers.get("python") or sys.executable)
    model_dir = Path(os.path.expanduser(answers["model_path"])).resolve()
    result = cached_parity(dest.resolve(), model_dir, template, mindspeed_home=mindspeed_home, python=python)
    return result, ""


def main(argv: list[str] | None = None) -> int:
    """CLI: exit 0 for match/compatible or when the check cannot run here, 1 for mismatch, 2 for error."""
    from hooks import load_answers

    parser = argparse.ArgumentParser(prog="python -m hooks.data.parity", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, nargs="?", help=".copier-answers/<model_id>.yml in the checkout")
    parser.add_argument("--dest", type=Path, default=Path.cwd(), help="checkout root (default: cwd)")
    parser.add_argument("--template", help="registered template name (default: the chat_template answer)")
    parser.add_argument("--model-dir", type=Path, help="check this model folder instead of an answers file's")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the check (with --model-dir)")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    if args.model_dir is not None:
        if not args.template:
            parser.error("--model-dir needs --template")
        answers = {"model_path": str(args.model_dir), "python": args.python, "data_branch": "a"}
    elif args.answers is not None:
        answers = load_answers(args.answers if args.answers.is_absolute() else dest / args.answers)
    else:
        parser.error("give an answers file or --model-dir with --template")
    result, why = parity_for_answers(dest, answers, args.template)
    if result is None:
        print(f"data parity: cannot run here: {why}")
        return 0
    print(result.summary())
    print(json.dumps({"verdict": result.verdict}))
    return {"mismatch": 1, "error": 2}.get(result.verdict, 0)


if __name__ == "__main__":
    raise SystemExit(main())
