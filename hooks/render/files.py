"""Rendering generated files: the Jinja filters the templates use, and a render outside copier.

copier renders the scaffold into the checkout. The data-parity check that picks the data branch
runs *before* that, on the branch-b data plugin the copy would write, so this module renders those
template files the way copier does (``template_environment``: same loader root, same environment options
read from copier.yml, configured by the same function as copier's extension) into a scratch folder.
``tests/test_render.py`` checks that both renders are byte-identical.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from pathlib import Path
from typing import Any

from hooks import TEMPLATE_ROOT, scaffold
from hooks.data.batch_keys import batch_keys
from hooks.data.columns import data_attr, data_has
from hooks.model.facts import ModelFacts
from hooks.render.destination import resolved, resolved_answers

WIDTH = 116  # generated Python stays under ruff's 120 columns


def width(text: str) -> int:
    """Columns ``text`` takes on a line as ruff counts them: an East Asian wide character (InternVL's Chinese
    system message) takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _fitting(text: str, size: int) -> int:
    """How many leading characters of ``text`` fit in ``size`` columns."""
    used = 0
    for index, ch in enumerate(text):
        used += width(ch)
        if used > size:
            return index
    return len(text)


def _chunks(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` columns, cut after a newline or space where possible."""
    pieces = []
    while width(text) > size:
        fit = max(_fitting(text, size), 1)
        cut = max(text.rfind("\n", 0, fit), text.rfind(" ", 0, fit)) + 1 or fit
        pieces.append(text[:cut])
        text = text[cut:]
    return [*pieces, text] if text else pieces


def pyrepr(value: Any, indent: int = 0, start: int | None = None) -> str:
    """A Python literal for ``value`` that starts at column ``start`` (default ``indent``) of a line indented by
    ``indent``: a string too long for it becomes implicitly joined pieces, a long list one item per line."""
    text = repr(value)
    start = indent if start is None else start
    if width(text) + start <= WIDTH:
        return text
    inner = " " * (indent + 4)
    if isinstance(value, str):
        body = [f"{inner}{piece!r}\n" for piece in _chunks(value, WIDTH - len(inner) - 3)]
        return "(\n" + "".join(body) + " " * indent + ")"
    if isinstance(value, (list, tuple)):
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
        return opening + "\n" + "".join(f"{inner}{item!r},\n" for item in value) + " " * indent + closing
    return text


def md_code(value: Any, cell: bool = False) -> str:
    """``value`` as a Markdown code span a reader can copy: a string as its Python literal (``<``/``>`` and
    non-ASCII kept, a newline shown as ``\\n``, quotes showing where it starts and ends), anything else as JSON;
    ``cell``: escaped for a table cell (``|`` as ``\\|``, which GFM turns back into ``|`` inside the span)."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def class_prefix(model_id: str) -> str:
    """``qwen2_5_vl`` -> ``Qwen25Vl``: the model id as a class-name prefix."""
    return "".join(part[:1].upper() + part[1:] for part in str(model_id).split("_") if part)


def copies_remote_code(facts: ModelFacts | dict[str, Any]) -> bool:
    """The plugin subclasses a class from the model folder's own code (not a transformers class).

    Also the ``msmm_copies_remote_code`` filter that partials/modeling.py.jinja branches on.
    """
    typed = ModelFacts.of(facts)
    return bool(typed and typed.remote_code) and not typed.class_module.startswith("transformers.")


def fields_json(text: str) -> str:
    """The ``data_fields`` answer as a one-line JSON object (valid YAML), keys sorted."""
    from hooks.data.records import parse_fields

    return json.dumps(parse_fields(text), sort_keys=True)


def cutoff_len(facts: ModelFacts | dict[str, Any] | None) -> int:
    """``basic_parameters.cutoff_len`` for the model (``hooks.model.memory.sample_cutoff``)."""
    from hooks.model.memory import sample_cutoff

    typed = ModelFacts.of(facts)
    return sample_cutoff(typed.processor.one_image_tokens or 0 if typed else 0)


RENDER_FILTERS = {
    "msmm_batch_keys": lambda facts, branch, collator: batch_keys(ModelFacts.of(facts), branch, collator),
    "msmm_data_has": data_has,
    "msmm_data_attr": data_attr,
    "msmm_cutoff_len": cutoff_len,
    "msmm_fields_json": fields_json,
    "msmm_copies_remote_code": copies_remote_code,
    "msmm_class_prefix": class_prefix,
    "pyrepr": pyrepr,
    "msmm_md_code": md_code,
    "shquote": lambda value: shlex.quote(str(value)),
    "msmm_path": resolved,  # a path answer as the copy writes it: resolved once (hooks.render.destination)
    "msmm_resolved": resolved_answers,
}


def configure_environment(environment) -> None:  # noqa: ANN001 - a jinja2.Environment
    """What this template adds to a Jinja environment: its filters. copier's environment gets them through the
    extension (``MigrateExtension``), the copy-time evidence's through ``template_environment``: one function."""
    environment.filters.update(RENDER_FILTERS)


def template_environment():  # noqa: ANN201 - jinja2 is imported here, lazily
    """A Jinja environment made as copier makes its own (``Worker.jinja_env``): sandboxed, its loader rooted at the
    template, ``copier.yml``'s ``_envops``, configured by ``configure_environment``.

    Not copier's object itself: building that inside the probe would load the extension from a fresh clone of the
    template, which swaps the ``hooks`` package under the running process; and the probe's interpreter (the user's
    training one) need not have copier. ``tests/test_render.py`` compares this render with the copy's, byte for byte.
    """
    import jinja2
    import jinja2.sandbox
    import yaml

    envops = dict(yaml.safe_load((TEMPLATE_ROOT / "copier.yml").read_text(encoding="utf-8")).get("_envops") or {})
    if envops.get("undefined") in ("jinja2.Undefined", "jinja2.StrictUndefined"):  # copier's two accepted values
        envops["undefined"] = getattr(jinja2, envops["undefined"].split(".")[1])
    environment = jinja2.sandbox.SandboxedEnvironment(loader=jinja2.FileSystemLoader(str(TEMPLATE_ROOT)), **envops)
    configure_environment(environment)
    return environment


def render_template_file(relpath: str, context: dict[str, Any]) -> str:
    """One template file rendered as copier renders it, through ``template_environment``."""
    return template_environment().get_template(relpath).render(**context)


def render_data_plugin(dest: Path, model_id: str, model_facts: dict[str, Any]) -> Path:
    """The branch-b data plugin files for ``model_id`` under ``dest/<package>/``; returns the package dir."""
    source = Path("template_vlm_branch_b") / scaffold.model_plugin_dir("{{model_id}}")
    package = Path(dest) / f"msmm_candidate_{model_id}"
    package.mkdir(parents=True, exist_ok=True)
    context = {"model_id": model_id, "model_facts": model_facts}
    for name in ("data_plugin_{{model_id}}.py.jinja", "processor_media.py.jinja"):
        target = package / name.replace("{{model_id}}", model_id).removesuffix(".jinja")
        target.write_text(render_template_file(str(source / name), context), encoding="utf-8")
    return package
