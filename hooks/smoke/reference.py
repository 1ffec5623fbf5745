"""The model's own objective, computed without the framework: the trainer's first losses checked against it.

A PASS that rests on a healthy-looking loss can still be the wrong objective: labels shifted twice,
positions the model's ``forward`` would compute differently, another attention mask, a learning rate
that is not the YAML's. So one process beside the smoke replays the batches the trainer's ranks fed
``forward`` (recorded by ``hooks/smoke/observer``; it starts once every rank has written them) through an
independent reference:

- **the model** is the class from the model folder (``hooks.model.loading``: transformers' class or the
  folder's own code), never the generated plugin, with the weights of the folder the trainer loaded
  (the observer checks those are the same tensors); where the trainer trains one stage of a bundle
  (Qwen-Omni's thinker, ``ModelFacts.trained_submodule``), that stage's own class from its sub-config;
  parameters are cast to the smoke's compute dtype (``fsdp_plan.param_dtype``) as FSDP2's mixed precision
  casts them, buffers are left as they are;
- **the loss** of each rank's micro-batch is the model's own ``.loss``; the framework's reduction
  (``features.loss_cfg.loss_type``) is then applied explicitly and named: ``default``/``per_sample_loss``
  average the ranks' per-micro-batch losses (at micro-batch 1 a sample's token mean is the micro-batch's),
  ``per_token_loss`` weights them by their label tokens (the global token mean);
- **the first steps** are a plain PyTorch loop: gradients averaged over the ranks (FSDP2's reduce-scatter),
  the global norm clipped at ``training.clip_grad``, ``torch.optim.AdamW`` with the YAML's betas, eps and
  weight decay (no-decay names as MindSpeed-MM forms them) and its learning-rate schedule, on fp32 master
  weights. Its losses, grad norms and learning rates are compared with the trainer's logged ones.

An exception here is never evidence: the check then says "could not evaluate" and why.

The process that runs it beside the trainer, and the files it shares with the smoke, are
``hooks.smoke.reference_run``'s.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hooks.model.stages import TrainedStage
from hooks.smoke.training_yaml import TrainingYaml

# Relative tolerances. The trainer and the reference run the same kernels on the same parameters, so they
# differ only in summation order (loss reductions, the gradient reduce-scatter): measured <= 2.1e-7 at step 1
# and equal to the logged digits through step 3 on the tiny families in fp32 (the CPU smoke). The fp32 bound
# is set by the subtlest injected bug: mRoPE positions replaced by text positions move a tiny random model's
# loss by < 1e-6 (its near-uniform logits barely depend on positions), so the gradients are compared too, per
# parameter (clean: <= 1.2e-7; that bug: 0.18 on a k_proj bias). In bf16 (NPU/GPU) one
# flipped rounding of a parameter is 4e-3 of it and AdamW's division by sqrt(v) + eps spreads such flips,
# hence the looser bf16 bounds past step 1 (stated, not yet measured on a device). Grad norms are logged
# with 3 decimals (the absolute bound).
# Grad norms: the reference sums squares in float64; the trainer's fp32 norm of a large shard is itself off
# by up to ~1e-5 (measured 6.3e-6 on the tiny Qwen2.5-VL, whose 217k-element lm_head dominates; the same
# gradient's fp32 torch norm is 1.5e-5 off), so 5e-5; the mRoPE-positions bug moves it by ~1.6e-4.
STEP1_RTOL = {"fp32": 1e-6, "bf16": 1e-4}
LATER_RTOL = {"fp32": 1e-5, "bf16": 1e-2}
GRAD_NORM_RTOL = {"fp32": 5e-5, "bf16": 5e-2}
GRAD_NORM_ATOL = 6e-4
LR_RTOL = 1e-6


@dataclass
class ReferenceSpec:
    """What the reference run beside the trainer needs (``reference_spec.json``: written by
    ``hooks.smoke.reference_run.start_reference``, read by the run and by the smoke's shape check)."""

    config: str  # the YAML the trainer trains with
    model_dir: str  # the model folder the trainer loads
    observed: str  # the observer's folder: recorded batches, gradient norms, the reference's outputs
    attributes: dict[str, Any] = field(default_factory=dict)  # attributes chat() sets on the model (the plugin's)
    defaults: dict[str, Any] = field(default_factory=dict)  # the trainer's own defaults for unset training keys
    ranks: int = 0  # the ranks whose batches the replay waits for
    stage: TrainedStage | None = None  # the trained sub-model, None where the whole class trains

    def write(self, path: Path) -> None:
        data = {**asdict(self), "stage": self.stage.to_dict() if self.stage else {}}
        path.write_text(json.dumps(data))

    @classmethod
    def read(cls, path: Path) -> ReferenceSpec:
        data = json.loads(path.read_text())
        given = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**{**given, "stage": TrainedStage.from_dict(data.get("stage"))})


@dataclass
class Equivalence:
    """What the reference computed and how the trainer's figures compare."""

    reduction: str = ""
    dtype: str = ""
    reference_losses: list[float] = field(default_factory=list)
    reference_grad_norms: list[float] = field(default_factory=list)
    reference_lrs: list[float] = field(default_factory=list)
    reference_param_norms: dict[str, float] = field(default_factory=dict)  # step 1, each parameter, unclipped
    clip_grad: float = 0.0
    dropout_off: list[str] = field(default_factory=list)  # dropout the smoke and the reference ran without
    error: str = ""  # could not evaluate: the cause


def reduction_of(loss_type: str, ranks: int) -> str:
    """The framework's reduction for ``loss_type``, in words (mindspeed_mm/fsdp/loss/loss_func.py)."""
    if loss_type == "per_token_loss":
        return f"per_token_loss: token sum over the {ranks} ranks / their label tokens (the global token mean)"
    if loss_type == "raw":
        return f"raw: the model's own loss on each rank, averaged over the {ranks} ranks"
    return (f"{loss_type or 'default'}: each rank's micro-batch token mean, averaged over the {ranks} data-parallel "
            "ranks (not the global token mean)")


def _label_tokens(batch: dict[str, Any]) -> int:
    labels = batch.get("labels")
    return int((labels[..., 1:] != -100).sum()) if labels is not None else 0


DERIVED = ("position_ids", "rope_deltas", "cache_position")  # the model's forward computes these itself


def dropout_off(model: Any) -> list[str]:
    """Set every dropout probability of ``model`` to 0 (``nn.Dropout``'s ``p``, the float ``*dropout*`` and
    ``layerdrop`` attributes transformers' modules read in training mode); the names changed, as ``name=p``.

    Dropout draws from each process's random stream, so a trainer's rank and a one-process reference never
    drop the same units: with dropout on (Kosmos-2's text model, p 0.1) the two objectives differ by ~1e-2
    at step 1 whatever the data path does. The smoke's ranks and the reference both run without it; the
    comparison is then exact, and a trained model keeps its dropout (the config is not changed).
    """
    import torch

    changed = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0:
            changed.append(f"{name}={module.p:g}")
            module.p = 0.0
            continue
        for attr, value in list(vars(module).items()):
            if (isinstance(value, float) and not isinstance(value, bool) and 0.0 < value < 1.0
                    and ("dropout" in attr or attr == "layerdrop")):
                changed.append(f"{name}.{attr}={value:g}".lstrip("."))
                setattr(module, attr, 0.0)
    return changed


def without_derived_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """The batch without what the model's own ``forward`` derives from ``input_ids`` and the media inputs.

    Positions are where migrations go wrong silently (mRoPE ``position_ids``/``rope_deltas`` computed by
    a collator, not by the model): the reference lets the model compute them its own way. One sequence
    per micro-batch (the smoke's) has no packing that would need them given.
    """
    return {k: v for k, v in batch.items() if k not in DERIVED}


def rank_weights(loss_type: str, tokens: list[int]) -> list[float]:
    """Each rank's share of the step's loss (and gradient), as the framework reduces them."""
    if loss_type == "per_token_loss" and sum(tokens):
        return [n / sum(tokens) for n in tokens]
    return [1.0 / len(tokens)] * len(tokens)


def lr_at(step: int, training: dict[str, Any]) -> float | None:
    """The YAML's learning rate at ``step`` (1-based): constant after a linear warmup; None for other decays."""
    lr = float(training.get("lr") or 0.0)
    iters = int(training.get("train_iters") or 1)
    warmup = int(float(training.get("lr_warmup_ratio") or 0.0) * iters)
    if step <= warmup:
        start = float(training.get("lr_start") or 0.0)
        return start + (lr - start) * (step - 1) / max(1, warmup)
    return lr if (training.get("lr_decay_style") or "constant") == "constant" else None


def _matches(patterns: list[str], name: str) -> bool:
    from hooks.model.matching import module_name_match

    return any(module_name_match(p, name) or name.startswith(p + ".") for p in patterns)


def build_reference(model_dir: Path, cfg: dict[str, Any], attributes: dict[str, Any],
                    stage: TrainedStage | None = None) -> tuple[Any, Any]:
    """(fp32 master model, compute copy): the folder's own class and weights, frozen as the YAML says; where the
    trainer trains one stage of a bundle (``stage``: ``ModelFacts.trained_submodule``), that stage's own class,
    built from its sub-config with the folder's ``<name>.*`` tensors (``hooks.model.stages.load_trained``)."""
    import copy

    import torch

    from hooks.model.stages import load_trained

    model_cfg = cfg.get("model") or {}
    trust = bool(model_cfg.get("trust_remote_code"))
    attn = model_cfg.get("attn_implementation")
    kwargs = {"attn_implementation": attn} if attn else {}
    master = load_trained(model_dir, stage, trust_remote_code=trust, dtype=torch.float32, **kwargs)
    # fp32 masters throughout: a sub-model the class builds in its own config's dtype (Ovis2's visual tokenizer,
    # bf16 by AutoModel.from_config) is fp32 in the trainer too (the plugin drops that dtype)
    master = master.float()
    for name, value in attributes.items():  # what the model's own chat() sets before forward (code convention)
        setattr(master, name, value)
    frozen = list(model_cfg.get("freeze") or [])
    for name, module in master.named_modules():
        if frozen and _matches(frozen, name):
            module.requires_grad_(False)
    master.train()
    return master, copy.deepcopy(master)


def _cast_params(master: Any, work: Any, dtype: Any) -> None:
    """The compute copy's parameters from the masters in ``dtype`` (buffers untouched, as FSDP2 leaves them)."""
    for mine, theirs in zip(work.parameters(), master.parameters(), strict=True):
        mine.data = theirs.data.to(dtype)
        mine.grad = None


def _optimizer(master: Any, training: dict[str, Any], defaults: dict[str, Any]) -> Any:
    """AdamW as MindSpeed-MM builds it: decay on all trainable parameters but the no-decay names/classes."""
    import torch

    def get(key: str) -> Any:
        value = training.get(key)
        return defaults.get(key) if value is None else value

    no_params = [p.lower() for p in get("no_decay_params") or []]
    no_classes = set(get("no_decay_modules") or [])
    owners = {f"{m}.{p}" if m else p: type(mod).__name__ for m, mod in master.named_modules()
              for p, _ in mod.named_parameters(recurse=False)}
    decay, plain = [], []
    for name, param in master.named_parameters():
        if param.requires_grad:
            skip = owners.get(name) in no_classes or any(s in name.lower() for s in no_params)
            (plain if skip else decay).append(param)
    groups = [{"params": decay, "weight_decay": float(get("weight_decay") or 0.0)}]
    if plain:
        groups.append({"params": plain, "weight_decay": 0.0})
    return torch.optim.AdamW(groups, lr=float(training.get("lr") or 0.0), eps=float(get("adam_eps")),
                             betas=(float(get("adam_beta1")), float(get("adam_beta2"))))


def replay(spec: ReferenceSpec, built: tuple[Any, Any] | None = None) -> Equivalence:
    """The reference's losses, grad norms and learning rates for the recorded steps; ``built``: the models
    ``build_reference`` made while the trainer ran (seeded as here)."""
    import torch
    import yaml

    cfg = yaml.safe_load(Path(spec.config).read_text())
    training, view = cfg.get("training") or {}, TrainingYaml.of(cfg)
    loss_type, dtype_name = view.loss_type, view.param_dtype
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype_name, torch.float32)
    out = Path(spec.observed)
    steps = sorted({int(p.stem.split("_step")[1]) for p in out.glob("batch_rank*_step*.pt")})
    ranks = sorted({int(p.stem.split("_")[1][4:]) for p in out.glob("batch_rank*_step1.pt")})
    result = Equivalence(reduction=reduction_of(loss_type, len(ranks)), dtype="bf16" if dtype != torch.float32 else
                         "fp32")
    if not steps or not ranks:
        result.error = "no recorded batches (the observer did not run)"
        return result
    if built is None:
        torch.manual_seed(0)
    master, work = built or build_reference(Path(spec.model_dir), cfg, spec.attributes, spec.stage)
    result.dropout_off = dropout_off(work)  # as the smoke's ranks run (hooks/smoke/observer)
    optimizer = _optimizer(master, training, spec.defaults)
    clip = float(training.get("clip_grad") if training.get("clip_grad") is not None else
                 spec.defaults.get("clip_grad") or 0.0)
    trainable = [p for p in master.parameters() if p.requires_grad]
    for step in steps:
        _cast_params(master, work, dtype)
        batches = [without_derived_inputs(torch.load(out / f"batch_rank{rank}_step{step}.pt", weights_only=False))
                   for rank in ranks]
        weights = rank_weights(loss_type, [_label_tokens(b) for b in batches])
        total = 0.0
        for batch, weight in zip(batches, weights, strict=True):  # each rank: its backward in the compute dtype,
            loss = work(**batch, use_cache=False).loss            # its gradient reduced in fp32 (reduce_dtype)
            loss.backward()
            total += weight * float(loss.detach())
            for mine, theirs in zip(master.parameters(), work.parameters(), strict=True):
                if theirs.grad is not None and mine.requires_grad:
                    part = theirs.grad.float() * weight
                    mine.grad = part if mine.grad is None else mine.grad + part
                theirs.grad = None
        with_grad = [p for p in trainable if p.grad is not None]
        norm = torch.stack([p.grad.double().square().sum() for p in with_grad]).sum().sqrt().float() \
            if with_grad else torch.tensor(0.0)  # float64 sums: an fp32 norm is itself ~1e-5 off
        if step == steps[0]:
            result.reference_param_norms = {name: float(p.grad.double().square().sum().sqrt())
                                            for name, p in master.named_parameters() if p.grad is not None}
            result.clip_grad = clip
        if clip > 0:
            torch.nn.utils.clip_grads_with_norm_(with_grad, clip, norm)  # takes the parameters, scales their .grad
        lr = lr_at(step, training)
        for group in optimizer.param_groups:
            group["lr"] = lr if lr is not None else group["lr"]
        optimizer.step()
        optimizer.zero_grad()
        result.reference_losses.append(float(total))
        result.reference_grad_norms.append(float(norm))
        result.reference_lrs.append(float("nan") if lr is None else lr)
    return result


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def compare(eq: Equivalence, losses: list[float], grad_norms: list[float], lrs: list[float], *,
            exact: bool = True) -> tuple[list[str], list[str], list[str]]:
    """(problems, verified, not verified): the trainer's first losses, grad norms and learning rates against
    the reference; "could not evaluate" is neither a problem nor a verification.

    ``exact``: the figures are the trainer's own floats (the observer's ``training_log`` record); else they
    were read from the log, whose grad norm has 3 decimals (``GRAD_NORM_ATOL``).
    """
    if eq.error:
        return [], [], [f"loss equivalence: could not evaluate: {eq.error}"]
    k = min(len(eq.reference_losses), len(losses))
    if not k:
        return ["loss equivalence: the trainer logged no loss to compare"], [], []
    problems: list[str] = []
    step1 = _rel(losses[0], eq.reference_losses[0])
    if not step1 <= STEP1_RTOL[eq.dtype]:
        problems.append(f"step-1 loss {losses[0]:.6f} is not the model's own objective {eq.reference_losses[0]:.6f} "
                        f"(relative error {step1:.1e} > {STEP1_RTOL[eq.dtype]:.0e}; reduction {eq.reduction}): the "
                        "trainer computes another loss on the same batch and weights (labels, positions, attention "
                        "mask or loss reduction differ from the model's own forward)")
    atol = 0.0 if exact else GRAD_NORM_ATOL
    norm1 = _rel(grad_norms[0], eq.reference_grad_norms[0]) if grad_norms else 0.0
    if grad_norms and not problems and abs(grad_norms[0] - eq.reference_grad_norms[0]) > max(
            GRAD_NORM_RTOL[eq.dtype] * eq.reference_grad_norms[0], atol):
        bound = GRAD_NORM_RTOL[eq.dtype]
        problems.append(f"step-1 grad norm {grad_norms[0]:.6f} is not the model's own objective's "
                        f"{eq.reference_grad_norms[0]:.6f} (relative error {norm1:.1e} > {bound:.0e}): "
                        "same weights and batch, another gradient (positions, attention mask or a loss term differ "
                        "from the model's own forward)")
    for i in range(k):
        if i < len(lrs) and not math.isnan(eq.reference_lrs[i]) and _rel(lrs[i], eq.reference_lrs[i]) > LR_RTOL:
            problems.append(f"step {i + 1}: the trainer's learning rate {lrs[i]:.3e} is not the YAML's "
                            f"{eq.reference_lrs[i]:.3e} (training.lr and its schedule)")
            break
    for i in range(1, k):
        if _rel(losses[i], eq.reference_losses[i]) > LATER_RTOL[eq.dtype]:
            problems.append(f"step-{i + 1} loss {losses[i]:.6f} differs from a plain AdamW loop's "
                            f"{eq.reference_losses[i]:.6f} (relative {_rel(losses[i], eq.reference_losses[i]):.1e} > "
                            f"{LATER_RTOL[eq.dtype]:.0e}): the update is not the YAML's optimizer, learning rate, "
                            "clipping or gradient")
            break
    for i in range(1, min(k, len(grad_norms))):
        if abs(grad_norms[i] - eq.reference_grad_norms[i]) > max(GRAD_NORM_RTOL[eq.dtype] * eq.reference_grad_norms[i],
                                                                  atol):
            problems.append(f"step-{i + 1} grad norm {grad_norms[i]:.6f} differs from a plain AdamW loop's "
                            f"{eq.reference_grad_norms[i]:.6f}")
            break
    verified = [] if problems else [
        f"loss equivalence: step-1 loss {losses[0]:.6f} = the model's own {eq.reference_losses[0]:.6f} (relative "
        f"error {step1:.1e}, grad norm {norm1:.1e}, {eq.dtype}; reduction {eq.reduction}); steps 1-{k} losses and "
        f"grad norms equal a plain AdamW loop's within {LATER_RTOL[eq.dtype]:.0e} / {GRAD_NORM_RTOL[eq.dtype]:.0e}"
        + (f"; both without the model's dropout ({len(eq.dropout_off)} probabilities set to 0 in the smoke, e.g. "
           f"{eq.dropout_off[0]}: random drops differ between processes)" if eq.dropout_off else "")]
    return problems, verified, []


PARAM_RTOL = {"fp32": 1e-4, "bf16": 5e-2}  # one parameter's gradient norm (measured: see param_findings)
PARAM_FLOOR = 1e-3  # of the total gradient norm: below it a parameter's gradient is compared in absolute terms
WRAPPERS = ("_checkpoint_wrapped_module.", "_fsdp_wrapped_module.", "_orig_mod.")  # names wrappers insert


def param_findings(eq: Equivalence, trainer_norms: dict[str, Any], total_norm: float | None) -> tuple[
        list[str], list[str], list[str]]:
    """Each parameter's step-1 gradient norm against the model's own: (problems, verified, not verified).

    The trainer's norms were taken after clipping: they are divided by its clip coefficient (from its own
    total norm) first. The total norm alone hides a wrong gradient confined to a few parameters (text
    positions change only the attention projections' gradients, by ~1e-4 of the total).
    """
    if eq.error or not eq.reference_param_norms:
        return [], [], []
    if not trainer_norms or "error" in trainer_norms or total_norm is None:
        cause = (trainer_norms or {}).get("error") or "the observer recorded no step-1 gradients"
        return [], [], [f"per-parameter gradients: could not evaluate: {cause}"]
    coef = min(1.0, eq.clip_grad / (total_norm + 1e-6)) if eq.clip_grad > 0 else 1.0
    theirs = {_plain(name): value / coef for name, value in trainer_norms.items()}
    common = sorted(set(theirs) & set(eq.reference_param_norms))
    if not common:
        return [], [], ["per-parameter gradients: could not evaluate: no parameter name is common to the trainer's "
                        "model and the model's own class"]
    bound = PARAM_RTOL[eq.dtype]
    # A gradient that is zero in exact arithmetic (a key bias: softmax ignores a per-query constant) is
    # rounding noise in both, so errors are relative to at least PARAM_FLOOR of the whole gradient's norm.
    floor = PARAM_FLOOR * math.sqrt(sum(v * v for v in eq.reference_param_norms.values()))
    errors = sorted(((abs(theirs[n] - eq.reference_param_norms[n]) / max(eq.reference_param_norms[n], floor, 1e-30),
                      n) for n in common), reverse=True)
    worst, name = errors[0]
    if worst > bound:
        off = [f"{n} ({e:.1e})" for e, n in errors if e > bound]
        return [f"step-1 gradients of {len(off)} parameters are not the model's own objective's (relative error "
                f"> {bound:.0e}): {', '.join(off[:4])}{' ...' if len(off) > 4 else ''}: positions, attention "
                "mask or a loss term differ from the model's own forward there"], [], []
    missing = len(eq.reference_param_norms) - len(common)
    return [], [f"step-1 gradients: {len(common)} parameters equal the model's own within {bound:.0e} (worst "
                f"{worst:.1e}, {name}){f'; {missing} not compared (names differ)' if missing else ''}"], []


def _plain(name: str) -> str:
    for wrapper in WRAPPERS:
        name = name.replace(wrapper, "")
    return name


def trainer_figures(rank0: dict[str, Any], records: list[dict[str, Any]]) -> tuple[list[float], list[float],
                                                                                list[float], bool]:
    """(losses, grad norms, learning rates, exact): rank 0's unrounded record of the first steps, else the log's."""
    steps = rank0.get("exact")
    if steps:
        steps = sorted(steps, key=lambda r: r["step"])
        return ([r["loss"] for r in steps], [r["grad_norm"] for r in steps if r["grad_norm"] is not None],
                [r["lr"] for r in steps], True)
    return ([r["loss"] for r in records if r["loss"] is not None],
            [r["grad_norm"] for r in records if r["grad_norm"] is not None], [r["lr"] for r in records], False)


TRAINING_ARGS = "mindspeed_mm/fsdp/params/training_args.py"
OPTIMIZER_KEYS = ("adam_beta1", "adam_beta2", "adam_eps", "weight_decay", "clip_grad", "no_decay_modules",
                  "no_decay_params")


def training_defaults(mm_home: Path) -> dict[str, Any]:
    """The checkout's defaults for the optimizer settings a YAML may leave out (read, never imported)."""
    import ast

    try:
        tree = ast.parse((Path(mm_home) / TRAINING_ARGS).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in OPTIMIZER_KEYS:
            call = node.value
            for kw in call.keywords if isinstance(call, ast.Call) else []:
                if kw.arg == "default":
                    found[node.target.id] = ast.literal_eval(kw.value)
                elif kw.arg == "default_factory":
                    found[node.target.id] = []
            if not isinstance(call, ast.Call) and call is not None:
                found[node.target.id] = ast.literal_eval(call)
    return found
