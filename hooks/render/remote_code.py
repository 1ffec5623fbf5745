"""Generation work copier cannot do: the model's own code, copied next to the plugin that subclasses it.

copier renders templates; a remote-code model's plugin imports the release's modeling/configuration files
relatively (as the in-repo kimi plugins carry their HF files), so they are copied verbatim into
``mindspeed_mm/fsdp/models/<id>/remote_code/``, with the model card's image function and the user's sample builder
where the dataset plugin uses them. Run as copier's first task, right after it rendered the scaffold and before the
report's task (``hooks.report.postgen``): ``python -m hooks.render.remote_code .copier-answers/<model_id>.yml``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from hooks import load_answers, scaffold
from hooks.model.facts import ModelFacts
from hooks.render.files import copies_remote_code
from hooks.terminal import echo

# Where a remote-code model's own files go, inside its plugin dir (partials/modeling.py.jinja imports them).
REMOTE_CODE_DIR = "remote_code"


def remote_code_files(model_dir: Path, class_module: str) -> list[Path]:
    """The model class's module, the AutoConfig module, and every module they import relatively.

    Only what the plugin needs: processor/tokenizer code stays in the model folder (the data
    path loads it from there), and nothing else is imported when the plugin dir is walked.
    """
    from transformers.dynamic_module_utils import get_relative_import_files

    auto_map = json.loads((model_dir / "config.json").read_text()).get("auto_map") or {}
    modules = [class_module.rpartition(".")[2]]
    config_ref = auto_map.get("AutoConfig")
    if isinstance(config_ref, str):
        modules.append(config_ref.split("--")[-1].rpartition(".")[0])
    files: set[Path] = set()
    for module in modules:
        source = model_dir / f"{module}.py"
        if not source.is_file():
            raise FileNotFoundError(f"model_path: {source} not found; the plugin subclasses a class defined there")
        files.add(source)
        files.update(Path(f) for f in get_relative_import_files(str(source)))
    return sorted(files)


def copy_remote_code(model_dir: Path, plugin_dir: Path, class_module: str) -> list[Path]:
    """Copy the model's remote code verbatim into ``plugin_dir/remote_code`` (kimik2_5/kimi_k3 practice).

    The folder gets no ``__init__.py`` on purpose: MindSpeed-MM's ``import_plugin`` walks only
    packages, so the copied files are imported solely through the plugin's relative import.
    """
    target = plugin_dir / REMOTE_CODE_DIR
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for source in remote_code_files(model_dir, class_module):
        shutil.copyfile(source, target / source.name)
        copied.append(target / source.name)
    return copied


def write_card_code(model_dir: Path, plugin_dir: Path, facts: ModelFacts) -> list[Path]:
    """``remote_code/model_card.py``: the model card's image function, when the dataset plugin uses it (the
    release defines its preprocessing only in README.md; ``hooks.data.model_card`` takes the card's text)."""
    from hooks.data import model_card

    module, _, function = facts.processor.form.image_function.partition(".")
    if module != model_card.CARD_MODULE:
        return []
    text = model_card.module_text(model_dir, function)
    if text is None:
        raise FileNotFoundError(f"model_path: {model_dir / model_card.CARD} no longer defines {function}; the probe "
                                "read it there")
    target = plugin_dir / REMOTE_CODE_DIR / f"{model_card.CARD_MODULE}.py"
    target.write_text(text, encoding="utf-8")
    return [target]


def write_builder_code(plugin_dir: Path, facts: ModelFacts) -> list[Path]:
    """``remote_code/sample_builder.py``: the user's sample builder (``hooks.data.builder``), a copy of the file
    the probe checked, so the dataset plugin never imports from where the user keeps it."""
    from hooks.data.builder import BUILDER_MODULE, parse

    spec = facts.processor.form.builder
    if not spec:
        return []
    source, _ = parse(spec)
    target = plugin_dir / REMOTE_CODE_DIR / f"{BUILDER_MODULE}.py"
    target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    return [target]


def write_remote_code(model_dir: Path, plugin_dir: Path, facts: ModelFacts) -> list[Path]:
    """Every file the plugin imports from ``remote_code/``: the release's code, its card's function, the builder."""
    return (copy_remote_code(model_dir, plugin_dir, facts.class_module) + write_card_code(model_dir, plugin_dir, facts)
            + write_builder_code(plugin_dir, facts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.render.remote_code", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    args = parser.parse_args(argv)
    answers = load_answers(args.answers)
    facts = ModelFacts.from_dict(answers["model_facts"])
    if not copies_remote_code(facts):
        return 0
    dest = Path.cwd()
    model_dir = Path(os.path.expanduser(answers["model_path"])).resolve()
    plugin_dir = dest / scaffold.model_plugin_dir(answers["model_id"])
    copied = write_remote_code(model_dir, plugin_dir, facts)
    echo(f"copied the model's remote code into {plugin_dir.relative_to(dest) / REMOTE_CODE_DIR}: "
         + ", ".join(p.name for p in copied))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
