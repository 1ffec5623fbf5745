"""The user's sample builder: the image preprocessing a release does not ship, supplied as ``path.py:function``.

Some remote-code releases keep their image preprocessing nowhere: not in their Python files, not in a
model card (a fine-tune's folder that copied only the code, InternVL2-style). Their ``chat()`` still says
exactly how a prompt is written and what it takes: a tensor of image tiles. So the one piece a user adds is
the function that makes those tiles from an image; everything else stays the model's own (its conversation
template, its ``chat()``'s image text, the tokenizer), and the builder is checked like the model's code:

- its contract (``CONTRACT``) on a test image: a floating ``(tiles, channels, height, width)`` tensor,
  finite, with the channels and the square side the model's config names;
- the probe then runs ``chat()`` with the builder's tiles and reads the format off it (``hooks.data.model_code``),
  and data parity compares the dataset plugin's batches with ``chat()``'s prompt token for token.

The post-generation task copies the file beside the model plugin as ``remote_code/sample_builder.py``; the
dataset plugin imports it from there, never from where the user keeps it.

``python -m hooks.data.builder MODEL_DIR --skeleton my_builder.py`` writes a skeleton that states the contract
with this model's figures.
"""

from __future__ import annotations

import argparse
import inspect
import json
import linecache
import sys
import types
from pathlib import Path
from typing import Any

from hooks.data.skeleton import skeleton_file

BUILDER_MODULE = "sample_builder"
CONTRACT = ("takes one image (a PIL RGB image; or a file path when its first parameter is opened with "
            "Image.open) and returns a floating torch tensor (tiles, channels, height, width): the tiles the "
            "model's chat() takes as pixel_values, normalised as its vision tower was trained")


def parse(spec: str) -> tuple[Path, str]:
    """(file, function) of an answer ``path.py:function``; ``ValueError`` says what is wrong with it."""
    path, sep, function = str(spec).strip().rpartition(":")
    if not sep or not path.endswith(".py") or not function.isidentifier():
        raise ValueError(f"{spec!r} is not path.py:function")
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ValueError(f"{file} does not exist")
    return file, function


def resolve(spec: str) -> str:
    """The answer with its file made absolute (what the model facts record)."""
    file, function = parse(spec)
    return f"{file}:{function}"


def load_builder(spec: str) -> Any:
    """The builder function, from its file loaded as a module named ``sample_builder`` (as the plugin imports it).

    Runs the user's file: it is the user's own code, named in an answer."""
    file, function = parse(spec)
    from hooks.compat import ensure_torchvision

    ensure_torchvision()  # preprocessing code imports torchvision.transforms
    text = file.read_text(encoding="utf-8")
    module = types.ModuleType(BUILDER_MODULE)
    module.__file__ = str(file)
    linecache.cache[str(file)] = (len(text), None, text.splitlines(True), str(file))  # inspect.getsource
    exec(compile(text, str(file), "exec"), module.__dict__)  # noqa: S102 - the user's own builder
    found = module.__dict__.get(function)
    if not inspect.isfunction(found):
        raise ValueError(f"{file} defines no function {function}")
    return found


def _field(holder: Any, key: str) -> Any:
    """``key`` of a config object or of config.json's dict (the skeleton reads the file, the check the class)."""
    return holder.get(key) if isinstance(holder, dict) else getattr(holder, key, None)


def image_size(config: Any) -> int | None:
    """The square side the vision tower takes, where the config names one."""
    for holder, key in ((config, "force_image_size"), (_field(config, "vision_config"), "image_size")):
        value = _field(holder, key) if holder is not None else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def channels(config: Any) -> int:
    vision = _field(config, "vision_config")
    return int((_field(vision, "num_channels") if vision is not None else None) or 3)


def contract_problems(function: Any, config: Any, image: Any, image_file: bool) -> list[str]:
    """What the builder's output breaks of ``CONTRACT`` on ``image``; an exception is "could not evaluate"."""
    import tempfile

    import torch

    try:
        if image_file:
            with tempfile.TemporaryDirectory(prefix="msmm-builder-") as tmp:
                path = Path(tmp) / "image.png"
                image.save(path)
                out = function(str(path))
        else:
            out = function(image)
    except Exception as err:  # noqa: BLE001 - never evidence: the cause is the answer
        return [f"could not evaluate the sample builder: it raised {type(err).__name__}: {str(err)[:300]}"]
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.dim() != 4:
        kind = f"a {out.dim()}-d {out.dtype} tensor" if isinstance(out, torch.Tensor) else type(out).__name__
        return [f"the sample builder returned {kind}; it must return a floating (tiles, channels, height, width) "
                "tensor"]
    tiles, got_channels, height, width = out.shape
    side, want_channels = image_size(config), channels(config)
    problems = []
    if tiles < 1:
        problems.append("the sample builder returned no tiles")
    if got_channels != want_channels:
        problems.append(f"the sample builder's tiles have {got_channels} channels; the vision tower takes "
                        f"{want_channels}")
    if side is not None and (height, width) != (side, side):
        problems.append(f"the sample builder's tiles are {height}x{width}; the model's config takes {side}x{side} "
                        "(force_image_size / vision_config.image_size)")
    if not bool(torch.isfinite(out).all()):
        problems.append("the sample builder's tiles hold NaN or Inf")
    return problems


def skeleton(model_dir: Path, function: str = "load_image") -> str:
    """A builder file for ``model_dir`` whose docstring states the contract with the model's own figures."""
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    side = image_size(config)
    figures = [f"height = width = {side} (force_image_size / vision_config.image_size)" if side else
               "height and width: the vision tower's input size", f"channels = {channels(config)}"]
    for key in ("downsample_ratio", "dynamic_image_size", "max_dynamic_patch", "min_dynamic_patch", "use_thumbnail"):
        if key in config:
            figures.append(f"config.json {key} = {json.dumps(config[key])}")
    return skeleton_file(
        model_dir, function, kind="Sample builder", contract=f"(image) {CONTRACT}",
        figures="\n".join(f"    - {line}" for line in figures),
        advice="Take the preprocessing from the model's release (its model card's quick-start, or the base model's)\n"
               "rather than writing your own: chat() was trained on exactly that. The copy checks the contract on a\n"
               "test image, runs the model's chat() with your tiles and compares the training prompt with chat()'s\n"
               "token for token; it cannot see a wrong normalisation, so copy the mean and std from the release.",
        imports="import torch\nfrom PIL import Image", signature="(image: Image.Image) -> torch.Tensor",
        doc="(tiles, channels, height, width) float tensor of one image: the pixel_values chat() takes.",
        todo="write the model's own image preprocessing here")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.data.builder", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--skeleton", type=Path, required=True, help="the builder file to write (not overwritten)")
    parser.add_argument("--contract", choices=("tiles", "prompt"), default="tiles",
                        help="tiles: an image function for chat() (default); prompt: the whole inference prompt, "
                             "for a release where nothing builds a sample (hooks.data.prompt_builder)")
    parser.add_argument("--function", default=None, help="load_image (tiles) or build_prompt (prompt)")
    args = parser.parse_args(argv)
    from hooks.data import prompt_builder

    args.function = args.function or (prompt_builder.FUNCTION if args.contract == "prompt" else "load_image")
    if args.skeleton.exists():
        print(f"error: {args.skeleton} exists; name a new file", file=sys.stderr)
        return 2
    if not (args.model_dir / "config.json").is_file():
        print(f"error: {args.model_dir} has no config.json", file=sys.stderr)
        return 2
    text = (prompt_builder.prompt_skeleton(args.model_dir, args.function) if args.contract == "prompt" else
            skeleton(args.model_dir, args.function))
    args.skeleton.write_text(text, encoding="utf-8")
    print(f"wrote {args.skeleton}: fill in {args.function}, then copy with "
          f"-d sample_builder={args.skeleton}:{args.function}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
