"""Shrink a (possibly full-size) VLM directory into a tiny random-weight copy for smoke runs.

A smoke run must exercise the user's *real* model class, tokenizer, processor and
chat template, but cannot afford the real weights. We therefore keep every
non-weight file verbatim and rewrite only ``config.json``: few layers and small
widths, kept consistent across the text and vision sub-configs, then save random
weights built with the real class. Things that decide how many tokens an image
becomes (patch size, spatial merge, temporal patch, image size) and the vocabulary
(token ids must stay valid) are never changed, so the unchanged processor still
matches the shrunk model.

The config is handled as a dict walk over the config and all nested sub-configs
(``text_config``, ``vision_config``, ``llm_config``, ...) with rules keyed on well
known field names; what a single family needs beyond that lives in one small
function in ``FAMILY_FIXES``. Weights are never read.

The generic rules are ``hooks.model.shrink_rules``, the per-family fixes ``hooks.model.shrink_families``; this
module shrinks a config dict with them, builds and saves the random model and copies the folder.

``python -m hooks.model.shrink SRC DEST [--trust-remote-code] [--layers N] [--seed N]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hooks import exit_now
from hooks.model.shrink_families import FAMILY_FIXES
from hooks.model.shrink_rules import (
    DROP_KEYS,
    LAYER_KEYS,
    VOLATILE_KEYS,
    Dims,
    first_key,
    fix_feature_layers,
    iter_levels,
    shrink_text_level,
    shrink_vision_level,
)

MARKER = ".shrink.json"
SHRINK_VERSION = 2  # 2: Qwen-VL keeps its resampler width (_fix_qwen_vl)

WEIGHT_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".onnx", ".npz", ".pdparams",
)


# Config ------------------------------------------------------------------------------------


def shrink_config_dict(data: dict[str, Any], dims: Dims) -> dict[str, Any]:
    """Return a shrunk copy of a config dict (as produced by ``PretrainedConfig.to_dict``)."""
    data = json.loads(json.dumps(data, default=_json_value))
    for key in DROP_KEYS:
        data.pop(key, None)
    levels = list(iter_levels(data))
    for lv in levels:
        for key in VOLATILE_KEYS:
            lv.data.pop(key, None)
    text_levels = [lv for lv in levels if lv.role == "text"]
    for lv in text_levels:
        shrink_text_level(lv.data, dims)
    text_hidden = dims.text_hidden if text_levels else dims.vision_hidden
    depths = [int(lv.data[k]) for lv in text_levels if (k := first_key(lv.data, LAYER_KEYS))]
    text_layers = depths[0] if depths else dims.layers
    for lv in levels:
        if lv.role == "vision":
            shrink_vision_level(lv.data, dims, text_hidden, text_layers)
    fix_feature_layers(levels)
    fix = FAMILY_FIXES.get(str(data.get("model_type")))
    if fix is not None:
        fix(data, dims)
    return data


def _json_value(value: Any) -> Any:
    """What config.json holds for a value ``to_dict()`` leaves as an object: remote code keeps
    ``torch.dtype`` objects in its configs (transformers converts only ``dtype``/``torch_dtype``)."""
    import torch

    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    raise TypeError(f"config value {value!r} ({type(value).__name__}) has no config.json form")


def _target_dtype(config: Any) -> Any:
    """Keep fp32 checkpoints in fp32; everything else is saved as bf16 (as released VLMs are)."""
    import torch

    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if dtype in (torch.float32, "float32"):
        return torch.float32
    return torch.bfloat16


def load_and_shrink_config(src: Path, dims: Dims, trust_remote_code: bool) -> tuple[Any, type | None]:
    """Read ``src/config.json`` as MindSpeed-MM does (AutoConfig, else the custom-model path) and rebuild the
    same config class, shrunk; with the model class when only the folder's code names it (custom path)."""
    from hooks.model.loading import load_config_and_class

    config, cls, custom = load_config_and_class(Path(src), trust_remote_code=trust_remote_code)
    data = shrink_config_dict(config.to_dict(), dims)
    return type(config).from_dict(data), cls if custom else None


# Model -------------------------------------------------------------------------------------


def _remote_class(config: Any, src: Path) -> Any | None:
    """The remote-code class named by ``architectures[0]`` in ``auto_map``, if any."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    auto_map = getattr(config, "auto_map", None) or {}
    arch = (getattr(config, "architectures", None) or [""])[0]
    refs = [v[0] if isinstance(v, (list, tuple)) else v for _, v in sorted(auto_map.items())]
    ref = next((r for r in refs if r and r.split(".")[-1] == arch), None)
    for key in ("AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModelForCausalLM", "AutoModel"):
        ref = ref or auto_map.get(key)
    return get_class_from_dynamic_module(ref, str(src)) if ref else None


def model_class(config: Any, src: Path, trust_remote_code: bool) -> Any | None:
    """The class the checkpoint names in ``architectures``; None means "ask the Auto classes"."""
    import transformers

    if trust_remote_code and getattr(config, "auto_map", None):
        cls = _remote_class(config, src)
        if cls is not None:
            return cls
    arch = (getattr(config, "architectures", None) or [None])[0]
    return getattr(transformers, arch, None) if arch else None


def build_random_model(config: Any, src: Path, trust_remote_code: bool, seed: int, cls: type | None = None) -> Any:
    """Instantiate random weights with the real class; the seed makes them reproducible."""
    import torch
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(seed)
    cls = cls or model_class(config, src, trust_remote_code)
    if cls is None:
        model = AutoModelForImageTextToText.from_config(config, trust_remote_code=trust_remote_code)
    elif hasattr(cls, "_from_config"):
        model = cls._from_config(config)
    else:
        model = cls(config)
    dtype = _target_dtype(config)
    model = model.to(dtype)
    model.config.dtype = str(dtype).removeprefix("torch.")
    return model


# Files -------------------------------------------------------------------------------------


def is_weight_file(name: str) -> bool:
    """Weights and weight indexes are the only files a shrunk copy must not inherit."""
    return name.endswith(WEIGHT_SUFFIXES) or name.endswith(".index.json")


def _skip_in_subdir(_dir: str, names: list[str]) -> list[str]:
    """``copytree`` filter: weights can hide in sub-folders too (e.g. ``original/*.pth``)."""
    return [n for n in names if n.startswith(".") or is_weight_file(n)]


def copy_non_weight_files(src: Path, dest: Path) -> list[str]:
    """Copy tokenizer, processor, template, generation config and code files verbatim."""
    copied = []
    for item in sorted(src.iterdir()):
        name = item.name
        if name.startswith(".") or name == "config.json" or is_weight_file(name):
            continue
        if item.is_dir():
            shutil.copytree(item, dest / name, ignore=_skip_in_subdir, dirs_exist_ok=True)
        else:
            shutil.copy2(item, dest / name)
        copied.append(name)
    return copied


def keep_model_type(src: Path, out: Path) -> None:
    """Keep the source's ``model_type`` spelling (or its absence) in the shrunk ``config.json``.

    ``save_pretrained`` writes the config class's own spelling, which can differ from the
    Auto key the source uses: transformers 4.57.1 saves ``Lfm2VlConfig`` as ``lfm2-vl``,
    a name ``AutoConfig`` does not know, while ``lfm2_vl`` loads.
    """
    source = json.loads((src / "config.json").read_text())
    want = source.get("model_type")
    path = out / "config.json"
    data = json.loads(path.read_text())
    kept = dict(data)
    if want and data.get("model_type") != want:
        data["model_type"] = want
    elif not want and not source.get("auto_map"):  # a custom model stays one: AutoConfig must not load the copy
        data.pop("model_type", None)
        data.pop("auto_map", None)
    if data != kept:
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _publish(tmp: Path, dest: Path) -> None:
    """Move a finished copy into place; only replaces an empty dir or an earlier shrink output."""
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    if dest.exists():
        if any(dest.iterdir()) and not (dest / MARKER).is_file():
            raise FileExistsError(f"{dest} is not empty and is not a shrink output; refusing to overwrite")
        shutil.rmtree(dest)
    tmp.rename(dest)


@dataclass
class ShrinkReport:
    """What ``shrink_model_dir`` produced, for the CLI summary and the marker file."""

    params: int
    vocab_params: int
    seconds: float


def _count_params(model: Any) -> tuple[int, int]:
    """Total parameters and those in vocab-sized matrices (embeddings, LM head)."""
    vocab = getattr(model.config.get_text_config(), "vocab_size", None)
    total = sum(p.numel() for p in model.parameters())
    vocab_params = sum(p.numel() for p in model.parameters() if p.dim() == 2 and p.shape[0] == vocab)
    return total, vocab_params


def _save(model: Any, folder: Path) -> None:
    """``save_pretrained``; for a model that holds one module under two names without declaring it tied
    (Phi-3-vision's ``embed_tokens``, kept again as ``vision_embed_tokens.wte``), which transformers refuses to
    write as safetensors, the config and the weights under every name (a copy per name, as a published
    checkpoint stores them)."""
    try:
        model.save_pretrained(folder, safe_serialization=True)
    except RuntimeError as err:
        if "shared tensors" not in str(err):
            raise
        from safetensors.torch import save_file

        for item in folder.glob("*.safetensors*"):
            item.unlink()
        model.config.save_pretrained(folder)
        save_file({name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()},
                  str(folder / "model.safetensors"), metadata={"format": "pt"})


def _shrink(src: Path, dest: Path, trust_remote_code: bool, layers: int, seed: int) -> ShrinkReport:
    """Do the work of ``shrink_model_dir`` and report sizes and time."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()  # model modules import torchvision transitively
    start = time.perf_counter()
    if layers < 2:
        raise ValueError("layers must be >= 2 so every repeated block container keeps two entries")
    if not (src / "config.json").is_file():
        raise FileNotFoundError(f"{src}/config.json not found")
    config, custom_class = load_and_shrink_config(src, Dims(layers=layers), trust_remote_code)
    model = build_random_model(config, src, trust_remote_code, seed, custom_class)
    params, vocab_params = _count_params(model)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _save(model, tmp)
        keep_model_type(src, tmp)
        copy_non_weight_files(src, tmp)
        marker = {"source": str(src.resolve()), "layers": layers, "seed": seed, "version": SHRINK_VERSION,
                  "params": params}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        for item in tmp.iterdir():
            item.chmod(0o644 if item.is_file() else 0o755)
        _publish(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return ShrinkReport(params, vocab_params, time.perf_counter() - start)


def shrink_model_dir(
    src: Path, dest: Path, *, trust_remote_code: bool = False, layers: int = 2, seed: int = 0
) -> Path:
    """Write a tiny random-weight copy of the model directory ``src`` into ``dest``; return ``dest``.

    Only ``config.json`` is read from the source model (never its weights); every
    other non-weight file is copied verbatim so the tokenizer, processor and
    chat template are exactly the user's.
    """
    _shrink(Path(src), Path(dest), trust_remote_code, layers, seed)
    return Path(dest)


def _parser() -> argparse.ArgumentParser:
    """Command line of ``python -m hooks.model.shrink``."""
    p = argparse.ArgumentParser(prog="python -m hooks.model.shrink", description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path, help="model directory (config.json + tokenizer/processor files)")
    p.add_argument("dest", type=Path, help="output directory for the tiny copy")
    p.add_argument("--trust-remote-code", action="store_true", help="allow the model's own *.py code")
    p.add_argument("--layers", type=int, default=2, help="layers per stack (>= 2)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    """Shrink and print a one-line summary."""
    args = _parser().parse_args(argv)
    report = _shrink(args.src, args.dest, args.trust_remote_code, args.layers, args.seed)
    print(
        f"shrunk {args.src} -> {args.dest}: {report.params / 1e6:.2f}M params "
        f"({report.vocab_params / 1e6:.2f}M in vocab-sized matrices), {report.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    exit_now(main())
