"""The generated training YAML as the smoke and the report read it: one typed view of the keys they check.

The YAML is MindSpeed-MM's, edits included (the smoke checks what the user will train), and the framework moves keys
between sections (``recompute_plan`` went from ``parallel`` to ``features``, ``loss_cfg`` from ``model``): where each
setting may stand is written down here once, and every reader (the contract smoke's plans, the memory and media
proofs, the loss reference, the system test's provenance) asks this class. Pure Python: it runs in the training
interpreter's observer and reference too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_RECOMPUTE_PLACES = ("features", "parallel")  # newest first: hooks.framework.checkout's ``recompute_in``
_LOSS_PLACES = ("features", "model")  # ``loss_in``


def _section(mapping: Any, key: str) -> dict[str, Any]:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, dict) else {}


def _modules(section: dict[str, Any]) -> list[str]:
    return list(section.get("apply_modules") or [])


@dataclass(frozen=True)
class TrainingYaml:
    """The settings of a training YAML the smoke stage checks, wherever the framework's schema places them."""

    fsdp_units: list[str] = field(default_factory=list)  # parallel.fsdp_plan.apply_modules
    param_dtype: str = "fp32"  # parallel.fsdp_plan.param_dtype
    reduce_dtype: str = "fp32"  # parallel.fsdp_plan.reduce_dtype
    recompute: bool = False  # <section>.recompute, the section holding the recompute plan
    recompute_units: list[str] = field(default_factory=list)  # <section>.recompute_plan.apply_modules, as written
    expert_units: list[str] = field(default_factory=list)  # parallel.ep_plan.apply_modules
    freeze: list[str] = field(default_factory=list)  # model.freeze
    loss_type: str = "default"  # <section>.loss_cfg.loss_type
    trust_remote_code: bool = False  # model.trust_remote_code
    model_path: str = ""  # model.model_name_or_path
    dataset_param: dict[str, Any] = field(default_factory=dict)  # data.dataset_param (the data path's own keys)

    @classmethod
    def of(cls, cfg: dict[str, Any] | None) -> TrainingYaml:
        """The view of a parsed YAML (``yaml.safe_load``); an empty one for none."""
        cfg = cfg if isinstance(cfg, dict) else {}
        parallel, model = _section(cfg, "parallel"), _section(cfg, "model")
        fsdp = _section(parallel, "fsdp_plan")
        place = next((_section(cfg, p) for p in _RECOMPUTE_PLACES if _modules(_section(_section(cfg, p),
                                                                                      "recompute_plan"))), {})
        loss = next((_section(_section(cfg, p), "loss_cfg") for p in _LOSS_PLACES
                     if _section(_section(cfg, p), "loss_cfg").get("loss_type")), {})
        return cls(fsdp_units=_modules(fsdp), param_dtype=str(fsdp.get("param_dtype") or "fp32"),
                   reduce_dtype=str(fsdp.get("reduce_dtype") or "fp32"),
                   recompute=bool(place.get("recompute")), recompute_units=_modules(_section(place, "recompute_plan")),
                   expert_units=_modules(_section(parallel, "ep_plan")), freeze=list(model.get("freeze") or []),
                   loss_type=str(loss.get("loss_type") or "default"), trust_remote_code=bool(model.get(
                       "trust_remote_code")), model_path=str(model.get("model_name_or_path") or ""),
                   dataset_param=_section(_section(cfg, "data"), "dataset_param"))

    @classmethod
    def read(cls, path: Path) -> TrainingYaml:
        import yaml

        return cls.of(yaml.safe_load(Path(path).read_text(encoding="utf-8")))

    @property
    def recomputed(self) -> list[str]:
        """What recompute wraps: its plan's modules where recompute is on, none where it is off."""
        return list(self.recompute_units) if self.recompute else []

    @property
    def max_samples(self) -> int | None:
        """``data.dataset_param.basic_parameters.max_samples``: how many records the run reads (None: all)."""
        value = _section(self.dataset_param, "basic_parameters").get("max_samples")
        return int(value) if value is not None else None
