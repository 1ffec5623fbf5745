"""1. The model's YAML against the checkout's live settings schema: unknown, moved and deprecated keys."""

from __future__ import annotations

import difflib
from typing import Any

from hooks import dig
from hooks.check.findings import Finding, Framework

FREE_PLACES = ("data.dataset_param", "data.val_dataset_param")
SETTINGS_ROOTS = ("model", "parallel", "training", "features", "tools", "data.dataloader_param")


def _moved_rules(facts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Dotted key -> (where this checkout reads it, why the key is not read where it is)."""
    rules: dict[str, tuple[str, str]] = {}
    other = {"features": "parallel", "parallel": "features"}
    recompute_in = facts.get("recompute_in")
    if recompute_in in other:
        for key in ("recompute", "recompute_plan"):
            rules[f"{other[recompute_in]}.{key}"] = (
                f"{recompute_in}.{key}", f"this MindSpeed-MM reads recompute from {recompute_in}: recompute stays off")
    loss_in = facts.get("loss_in")
    if loss_in in ("features", "model"):
        wrong = "model" if loss_in == "features" else "features"
        rules[f"{wrong}.loss_cfg"] = (f"{loss_in}.loss_cfg", f"this MindSpeed-MM reads loss_cfg from {loss_in}")
    collate = "data.dataloader_param.collate_param"
    if facts.get("collator_key") == "model_name":
        rules[f"{collate}.collator_id"] = (f"{collate}.model_name", "this MindSpeed-MM predates collator_id")
    return rules


def _in_settings(place: str) -> bool:
    return any(place == root or place.startswith(root + ".") for root in SETTINGS_ROOTS)


def schema_findings(cfg: dict[str, Any], fw: Framework) -> list[Finding]:
    """The YAML ``cfg`` against the checkout's settings (module docstring, 1)."""
    found: list[Finding] = []
    if not fw.places:
        return [Finding("warning", "no settings schema in this checkout (mindspeed_mm/fsdp/params/): settings not "
                        "checked", "run the check in a MindSpeed-MM checkout with the FSDP2 trainer")]
    rules = _moved_rules(fw.facts)

    def walk(place: str, node: dict[str, Any]) -> None:
        known = fw.places.get(place)
        for key, value in node.items():
            dotted = f"{place}.{key}".lstrip(".")
            if dotted in FREE_PLACES:
                continue
            if dotted in rules:
                target, why = rules[dotted]
                also = f" ({target} is set too: delete this one)" if dig(cfg, *target.split(".")) is not None else ""
                verb = "move" if target.rpartition(".")[2] == key else "rename"
                found.append(Finding("error", f"{dotted} has moved: {why}", f"{verb} it to {target}{also}"))
                continue
            if dotted in fw.deprecated:
                found.append(Finding("warning", f"{dotted} is deprecated in this MindSpeed-MM",
                                     _deprecated_fix(dotted, cfg)))
                continue
            if known is not None and key in known:
                if isinstance(value, dict) and dotted in fw.places:
                    walk(dotted, value)
                continue
            if known is not None and place and key in fw.extras:
                continue  # not a field, but the framework reads it (features.recompute at 57069cd5)
            if place == "" and isinstance(value, dict) and value:
                walk(dotted, value)  # an unknown section: say where each of its keys belongs
                continue
            elsewhere = [p for p, keys in fw.places.items() if key in keys and p != place and _in_settings(p)]
            if elsewhere:
                where = ", ".join(f"{p}.{key}" for p in elsewhere[:3])
                found.append(Finding("error", f"{dotted} is not a setting at {place or 'the top level'}: this "
                                     f"MindSpeed-MM has it at {where}", f"move it to {elsewhere[0]}.{key}"))
                continue
            close = difflib.get_close_matches(str(key), known or [], n=1)
            fix = (f"rename it to {place}.{close[0]}" if close else "remove it, or set what it meant as "
                   "mindspeed_mm/fsdp/params/ define")
            found.append(Finding("error", f"{dotted} is not a setting of this MindSpeed-MM: the trainer ignores it",
                                 fix))

    walk("", cfg)
    return found


def _deprecated_fix(dotted: str, cfg: dict[str, Any]) -> str:
    place, _, key = dotted.rpartition(".")
    if key == "model_name" and place.endswith("collate_param"):
        current = dig(cfg, *place.split("."), "collator_id")
        value = dig(cfg, *dotted.split("."))
        if current is not None:
            return "delete it: collator_id is set" if current == value else (
                f"delete it: it names {value!r}, collator_id names {current!r} (the trainer refuses both)")
        return f"rename it to collator_id: {value}"
    return "replace it as its help in mindspeed_mm/fsdp/params/ says"


