"""Build tiny, random-weight but *real* VLM directories and a matching demo data set.

Tests and the README demo need a model directory that looks exactly like a Hub
checkpoint (config, safetensors, tokenizer, processor, chat template) without a
network or gigabytes of weights. Each directory is built from the real
transformers classes, so everything downstream (AutoProcessor, the model's
forward, MindSpeed-MM's loaders) exercises the same code paths as with the full
model. Only the sizes are tiny: text 2 layers / hidden 64, vision 2 blocks /
hidden 32, a byte-level BPE tokenizer trained here on a built-in corpus, and a
pixel budget that turns a 64x64 image into 4 vision tokens.

Families live in the submodules (``core``, ``llava``, ``idefics``, ``misc``, ``remote``), the
sizes and tokenizer they share in ``common``; this module builds and caches a directory.

``python -m hooks.tiny ARCH DEST [--seed N]``, ``python -m hooks.tiny --dataset DEST``,
``python -m hooks.tiny --list``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hooks.data.sample import build_demo_dataset
from hooks.tiny.common import TinyParts

# 2: Gemma 3n's pad embedding row is no longer zero (NaN gradients in padded batches); 3: Gemma 3's image
# projection is drawn, not zeros (no vision-tower gradient at step 1); 4: Qwen3-Omni carries its release's chat
# template; 5: Mllama's cross-attention gates are drawn, not zeros (as Gemma 3's projection); 6: Gemma 3's image
# projection is zeros again, as from_config leaves it (the media proof notes a zero connector, issue 40)
BUILD_VERSION = 6
MARKER = ".tiny-build.json"


# The family modules, each exposing BUILDERS: dict[str, Callable[[], TinyParts]].
FAMILY_MODULES = ("hooks.tiny.core", "hooks.tiny.llava", "hooks.tiny.idefics", "hooks.tiny.misc", "hooks.tiny.remote",
                  "hooks.tiny.audio", "hooks.tiny.omni",
                  "hooks.tiny.prompt_vlm")


def all_builders(*, every: bool = False) -> dict[str, Callable[[], TinyParts]]:
    """The tiny architectures of every family module (imported on first use: each pulls in transformers).

    By default only those the installed transformers can build: a family module lists the others in
    ``UNAVAILABLE`` (Qwen3.5 needs transformers 5), so the 4.57 test matrix does not try them and the
    transformers-5 leg does. ``every=True`` lists all of them (the README's support table).
    """
    import importlib

    found: dict[str, Callable[[], TinyParts]] = {}
    for name in FAMILY_MODULES:
        module = importlib.import_module(name)
        skip = () if every else getattr(module, "UNAVAILABLE", ())
        found.update({arch: build for arch, build in module.BUILDERS.items() if arch not in skip})
    return found


def _marker(arch: str, seed: int) -> dict[str, Any]:
    """Identity of a build; a directory with an equal marker is reused as is."""
    return {"arch": arch, "seed": seed, "version": BUILD_VERSION}


def _is_complete(dest: Path, arch: str, seed: int) -> bool:
    """True when dest holds a finished build of the same arch, seed and builder version."""
    marker = dest / MARKER
    if not (marker.is_file() and (dest / "config.json").is_file()):
        return False
    if not any(dest.glob("*.safetensors")):
        return False
    try:
        return json.loads(marker.read_text()) == _marker(arch, seed)
    except (OSError, ValueError):
        return False


def _write_model(parts: TinyParts, out: Path, seed: int) -> None:
    """Instantiate random weights deterministically and save them as bf16 safetensors."""
    import torch

    torch.manual_seed(seed)
    model = parts.model_class(parts.config)
    model = model.to(torch.bfloat16)
    model.config.dtype = "bfloat16"
    model.save_pretrained(out, safe_serialization=True)


def _publish_mode(path: Path) -> None:
    """Give the build the usual umask-based modes (mkdtemp and safetensors create 0700/0600)."""
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o777 & ~umask)
    for item in path.iterdir():
        item.chmod((0o777 if item.is_dir() else 0o666) & ~umask)


def _replace_dir(tmp: Path, dest: Path) -> None:
    """Move a finished build into place; only ever removes an earlier tiny build or an empty dir."""
    if dest.exists():
        if any(dest.iterdir()) and not (dest / MARKER).is_file():
            raise FileExistsError(f"{dest} is not empty and is not a tiny build; refusing to overwrite")
        shutil.rmtree(dest)
    tmp.rename(dest)


def build_tiny_model(arch: str, dest: Path, *, seed: int = 0) -> Path:
    """Write a complete tiny HF model directory for ``arch`` into ``dest`` and return it.

    The build happens in a sibling temporary directory and is moved into place
    only when complete, so an interrupted build never looks finished; the marker
    file makes a repeated call with the same arch and seed a no-op.
    """
    builders = all_builders(every=True)
    if arch not in builders:
        raise KeyError(f"unknown arch {arch!r}; known: {', '.join(sorted(builders))}")
    dest = Path(dest)
    if _is_complete(dest, arch, seed):
        return dest
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        parts = builders[arch]()
        _write_model(parts, tmp, seed)
        parts.processor.save_pretrained(tmp)
        if parts.finish is not None:
            parts.finish(tmp)
        (tmp / MARKER).write_text(json.dumps(_marker(arch, seed), sort_keys=True, indent=2) + "\n")
        _publish_mode(tmp)
        _replace_dir(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


# CLI -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    """Command line: build a model, build the demo data set, or list the architectures."""
    p = argparse.ArgumentParser(prog="python -m hooks.tiny", description=__doc__.splitlines()[0])
    p.add_argument("arch", nargs="?", help="architecture to build (see --list)")
    p.add_argument("dest", nargs="?", type=Path, help="output model directory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dataset", type=Path, metavar="DEST", help="write the demo data set into DEST")
    p.add_argument("--samples", type=int, default=8, help="demo data set size")
    p.add_argument("--list", action="store_true", help="print the known architectures")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hooks.tiny``."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(sorted(all_builders())))
        return 0
    if args.dataset is not None:
        print(build_demo_dataset(args.dataset, samples=args.samples, seed=args.seed))
        return 0
    if args.arch is None or args.dest is None:
        parser.error("ARCH and DEST are required (or use --dataset DEST / --list)")
    start = time.perf_counter()
    out = build_tiny_model(args.arch, args.dest, seed=args.seed)
    print(f"{args.arch} -> {out} ({time.perf_counter() - start:.1f} s)")
    return 0

