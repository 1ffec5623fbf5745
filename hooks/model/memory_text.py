"""The memory plan as text: its Markdown table for MIGRATION.md, and the summary the answers file keeps.

In hooks/model, not hooks/render, on purpose: the probe (``hooks.model.facts.default_memory_plan``) stores
``summary(plan)``, table included, in its JSON while the model is built, and ``python -m hooks.model.cluster
--json`` prints it for the copy; copier keeps it in the answers file (``memory_plan.markdown``) and
partials/MIGRATION.md.jinja prints it as is. Rendering the table in hooks/render would need hooks/model to
import hooks/render (a back edge the layout test forbids) or change the answers' shape. So the text stays in
the model stage, apart from the arithmetic (``hooks.model.memory``) and the settings search
(``hooks.model.memory_plan``). ``summary`` sits here, not beside ``plan_memory``, because it attaches the table:
this module reads ``MemoryPlan``, so the search module cannot import it back without an import circle.
The notes' wording stays with the search that decides them (``plan_memory``).
"""

from __future__ import annotations

from typing import Any

from hooks.model.memory import SUMMARY_KEYS, size_text
from hooks.model.memory_plan import USABLE_DEVICE_SHARE, Breakdown, MemoryPlan


def markdown(plan: MemoryPlan) -> str:
    """The plan as a Markdown table plus notes, for MIGRATION.md."""
    b, mb = plan.breakdown, plan.micro_batch_size_used

    rows = [
        ("hardware", f"{plan.nodes} node(s) x {plan.devices_per_node} devices x {plan.device_memory_gb:g} GiB, "
                     f"{plan.host_memory_gb:g} GiB host per node"),
        ("parameters", f"{plan.total_params:,}" + (f" ({plan.expert_params:,} in experts)"
                                                    if plan.expert_params else "")),
        ("verdict", plan.verdict),
        ("settings", plan.settings.describe(plan.world)),
        *(_ddp_rows(b) if b.mode == "ddp" else [
            ("parameters per device (fp32 shard)", size_text(b.params)),
            ("gradients per device (fp32 shard)", size_text(b.grads)),
            ("optimizer states per device (AdamW, fp32)", size_text(b.optimizer))]),
        ("largest unit gathered (bf16)", f"{b.largest_unit or '(root)'}: {size_text(b.largest_unit_bytes)}"),
        ("all-gather / reduce-scatter peak", size_text(b.gather_peak)),
        # an empty root (every parameter in a unit: the FSDP section says so) would be a row of "0 B"
        *([("root unit gathered all step (bf16)", size_text(b.root_gathered))] if b.root_gathered else []),
        (f"activations per sample, cutoff_len {plan.cutoff_len} (ESTIMATE)",
         f"{size_text(b.activations_per_sample)} with recompute, "
         f"{size_text(b.activations_per_sample_no_recompute)} without"),
        (f"total per device at micro_batch_size {mb}",
         f"{size_text(b.device_total(mb))} of {size_text(plan.usable_bytes)} usable "
         f"({USABLE_DEVICE_SHARE:.0%} of {plan.device_memory_gb:g} GiB)"),
        ("largest micro_batch_size that fits", str(plan.max_micro_batch)),
        *([("host memory for offloaded states per node", size_text(b.host_per_node))] if plan.settings.cpu_offload
          else []),
        ("loading", f"{plan.loading}: {plan.loading_reason}"),
    ]
    lines = ["| item | value |", "|---|---|"]
    lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in rows]
    lines += ["", *[f"- {n}" for n in plan.notes]]
    return "\n".join(lines)


def _ddp_rows(b: Breakdown) -> list[tuple[str, str]]:
    """The world-size-1 rows: the framework's DDP path, not FSDP2 (``ddp_mode``)."""
    return [("parameters per device (DDP at one shard rank: bf16, param_dtype)", size_text(b.params)),
            ("gradients + DDP bucket copy (bf16)", size_text(b.grads)),
            ("optimizer states per device (AdamW, bf16 like the parameters)", size_text(b.optimizer)),
            ("clip_grad_norm's fp32 copies of the grads (after backward, instead of activations)",
             size_text(b.after_backward))]


def summary(plan: MemoryPlan) -> dict[str, Any]:
    """The plan as the answers file keeps it."""
    data = {**plan.to_dict(), "markdown": markdown(plan)}
    return {k: data[k] for k in SUMMARY_KEYS if k in data}


__all__ = ["markdown", "summary"]
