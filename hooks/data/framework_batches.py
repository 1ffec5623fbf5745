"""MindSpeed-MM's side of data parity: the batches its trainer would build, and whether its environment can.

The real ``huggingface`` dataset builder and the registered collator, configured by a YAML ``data`` section, the
YAML's plugins imported as the trainer imports them; the branch-c dataset plugin's own batches. An interpreter that
cannot import the framework is named as the cause (``environment_cause``), never taken for a data-path mismatch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _dataset_args(cls: type, dataset_param: dict[str, Any]) -> Any:
    """``dataset_param`` as the trainer's settings hold it: a pydantic model validates nested dicts itself;
    the plain dataclasses before 2026-04-27 are built by the framework's ``instantiate_dataclass``."""
    import dataclasses

    if dataclasses.is_dataclass(cls):
        from mindspeed_mm.fsdp.params.utils import instantiate_dataclass

        return instantiate_dataclass(cls, dataset_param)
    return cls(**dataset_param)


def _collator_class(collate_param: dict[str, Any], dataset_args: Any) -> tuple[Any, dict[str, Any]]:
    """The collator class and its arguments as this checkout's dataloader resolves them: the registry's
    ``resolve_data_collator`` (2026-06-09 on), else its ``DATA_COLLATOR`` dict keyed by ``model_name``."""
    from mindspeed_mm.fsdp.data.dataloader import data_collator

    if hasattr(data_collator, "resolve_data_collator"):
        return data_collator.resolve_data_collator(collate_param, dataset_args)
    kwargs = dict(collate_param)
    return data_collator.DATA_COLLATOR[kwargs.pop("model_name")], kwargs


def mindspeed_batches(config: dict[str, Any], sample_files: list[Path], work: Path,
                      model: Any) -> list[tuple[int, Any]]:
    """(the sample's own length, its collated batch or the error it met) per sample, built as the trainer
    builds them from ``config``."""
    from mindspeed_mm.fsdp.data import build_mm_dataset
    from mindspeed_mm.fsdp.params.data_args import DataSetArguments
    from mindspeed_mm.fsdp.utils.register import import_plugin

    import_plugin(config.get("training", {}).get("plugin", []))
    data = config["data"]
    dataset_param = json.loads(json.dumps(data["dataset_param"]))
    basic = dataset_param.setdefault("basic_parameters", {})
    basic.update(dataset_dir=str(work), cache_dir=str(work / "cache"), preprocessing_num_workers=None,
                 max_samples=None, streaming=False, overwrite_cache=True)
    for key in ("val_dataset", "val_max_samples", "val_rate"):
        basic.pop(key, None)
    from hooks.data.shapes import HUGGINGFACE, Convention

    convention = Convention.of_attr(dataset_param.get("attr") or {})  # the user's turns, as the YAML maps them
    rows: list[Any] = []
    for path in sample_files:
        try:
            record = json.loads(path.read_text())[0]
            if convention != HUGGINGFACE:  # the sample written as the user's data is: the YAML's attr reads it
                path = path.with_name(f"{path.stem}.attr{path.suffix}")
                path.write_text(json.dumps([convention.written(record)]))
            one = {**dataset_param, "basic_parameters": {**basic, "dataset": str(path)}}
            for column in ("videos", "audios"):  # a YAML maps these columns only for such data
                if column in record:
                    one["attr"] = {**one.get("attr", {}), column: column}
            rows.append(dict(build_mm_dataset(one)[0]))
        except Exception as err:  # noqa: BLE001 - judged per sample, beside what the model's processor makes of it
            rows.append(err)
    _single_process_group(work)  # the collator reads the parallel state, which needs a process group
    collate_param = dict(data["dataloader_param"].get("collate_param") or {})
    try:
        dataset_args = _dataset_args(DataSetArguments, dataset_param)
        collator_cls, kwargs = _collator_class(collate_param, dataset_args)
        collator = collator_cls(**kwargs, dataset_param=dataset_args, model=model)
    except Exception as err:  # noqa: BLE001 - the data path cannot collate for this model at all
        return [(0, row if isinstance(row, Exception) else err) for row in rows]
    batches: list[tuple[int, Any]] = []
    for row in rows:
        if isinstance(row, Exception):
            batches.append((0, row))
            continue
        try:
            batches.append((len(row["input_ids"]), collator([row])))
        except Exception as err:  # noqa: BLE001 - as above
            batches.append((len(row["input_ids"]), err))
    return batches


def plugin_batches(config: dict[str, Any], sample_files: list[Path], work: Path) -> list[tuple[int, Any]]:
    """Branch c: (sample length, batch or error) per sample from the generated dataset plugin, built as the
    trainer builds it (``data_register`` through ``build_mm_dataset``, then the dataset's own ``collate_fn``).

    The samples are in the huggingface shape, so the plugin reads them with the default field mapping
    (the user's mapping is checked against their first record when it is given).
    """
    from mindspeed_mm.fsdp.data import build_mm_dataset
    from mindspeed_mm.fsdp.utils.register import import_plugin

    import_plugin(config.get("training", {}).get("plugin", []))
    dataset_param = {**json.loads(json.dumps(config["data"]["dataset_param"])), "data_fields": {}}
    basic = {**dataset_param.get("basic_parameters", {}), "dataset_dir": str(work), "max_samples": None}
    batches: list[tuple[int, Any]] = []
    for path in sample_files:
        try:
            dataset = build_mm_dataset({**dataset_param, "basic_parameters": {**basic, "dataset": str(path)}})
            sample = dataset[0]
            batches.append((sample["input_ids"].shape[-1], dataset.collate_fn([sample])))
        except Exception as err:  # noqa: BLE001 - judged per sample, beside what the model's processor makes of it
            batches.append((0, err))
    return batches


def _single_process_group(work: Path) -> None:
    """A world of one (gloo), as a one-device trainer has; after the dataset, whose builder would join it."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=f"file://{work / 'store'}", rank=0, world_size=1)


def meta_model(model_dir: Path, trust_remote_code: bool) -> Any:
    """The model on the meta device when its collator-side hook (``get_rope_index``) needs it, else None."""

    from hooks.model.build import build_meta_model
    from hooks.model.loading import load_config_and_class

    config, cls, _ = load_config_and_class(model_dir, trust_remote_code=trust_remote_code)
    model = build_meta_model(cls, config)
    has_rope = hasattr(model, "get_rope_index") or hasattr(getattr(model, "model", None), "get_rope_index")
    return model if has_rope else None



def environment_cause(err: BaseException, dest: Path | None = None) -> str:
    """One line naming ``python`` (or the missing package) when ``err`` is the interpreter's fault, else "".

    An exception is never evidence about a data path: a package that does not import, or a framework that
    refuses this torch, says nothing of the model's format. Such causes stop the copy before rendering.
    """
    exe = sys.executable
    if isinstance(err, ModuleNotFoundError) and err.name:
        return (f"python: {exe} has no package {err.name.split('.')[0]!r} ({err}), which the framework's data path "
                "imports; install it in the training environment or answer another interpreter")
    if isinstance(err, ImportError):
        return (f"python: {exe} cannot import what the framework needs ({type(err).__name__}: {err}); use the "
                "transformers/torch versions the checkout supports in the training environment")
    if "is not supported now" in str(err) and "torch" in str(err):
        import torch

        accepted = ", ".join(accepted_torch(dest or Path.cwd())) or "the versions its fully_shard patch names"
        return (f"python: MindSpeed-MM refuses torch {torch.__version__} at import ({err}); its fully_shard patch "
                f"accepts torch {accepted} (mindspeed_mm/fsdp/ops/fully_shard/fully_shard.py): answer an "
                "interpreter with one of them")
    return ""


FULLY_SHARD_FILE = "mindspeed_mm/fsdp/ops/fully_shard/fully_shard.py"


def accepted_torch(dest: Path) -> list[str]:
    """The torch versions the checkout's ``fully_shard`` patch accepts (``"2.7.1" in torch.__version__``)."""
    import re

    try:
        text = (dest / FULLY_SHARD_FILE).read_text(encoding="utf-8")
    except OSError:
        return []
    return list(dict.fromkeys(re.findall(r"""["'](\d+\.\d+\.\d+)["']\s+in\s+torch\.__version__""", text)))


def framework_import_error() -> str:
    """The framework's ops package, imported as the trainer imports it (its torch gate runs at import)."""
    import importlib

    try:
        importlib.import_module("mindspeed_mm.fsdp.ops")
    except Exception as err:  # noqa: BLE001 - classified below; anything else is the framework's own failure
        return environment_cause(err) or (f"python: MindSpeed-MM's mindspeed_mm.fsdp.ops does not import in "
                                          f"{sys.executable} ({type(err).__name__}: {err}); fix the training "
                                          "environment")
    return ""


