"""The README and docs/ say only what the code has: every answer, command module and file they name exists.

The README is the first thing a newcomer reads, so it stays short (the topics live in docs/, one file each) and a
renamed answer or a moved module breaks this test instead of leaving a stale sentence behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
# Folders of this repository whose files the pages name; other paths (mindspeed_mm/..., examples/<id>/...) are the
# framework's or the generated scaffold's.
OURS = ("hooks/", "tests/", "docs/", "partials/", "template_vlm_branch_a/", "template_vlm_branch_b/",
        "template_custom_dataset_c/", ".ci/")
CHECKOUT_TESTS = ("tests/st", "tests/README.md")  # MindSpeed-MM's tests/ (a copy writes tests/st/ there)


def _questions() -> set[str]:
    """copier.yml's questions (its settings start with an underscore)."""
    data = yaml.safe_load((ROOT / "copier.yml").read_text(encoding="utf-8"))
    return {key for key in data if not key.startswith("_")}


def _code(text: str) -> str:
    """Every code span and code block of a page, joined."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    return "\n".join(blocks + spans)


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move a topic to docs/"


def test_every_answer_named_is_a_question() -> None:
    questions = _questions()
    for page in PAGES:
        code = _code(page.read_text(encoding="utf-8"))
        for key in set(re.findall(r"-d ([a-z_]+)=", code)) - {"key"}:  # `-d key=value`: the form itself
            assert key in questions, f"{page.name} gives -d {key}=..., which copier.yml does not ask"


def test_the_questions_table_names_questions() -> None:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| question | meaning |"):].split("\n\n")[0]
    questions = _questions()
    for row in table.splitlines()[2:]:
        for key in re.findall(r"`([a-z_]+)`", row.split("|")[1]):
            assert key in questions, f"README's questions table names {key}, which copier.yml does not ask"


def test_every_command_module_exists() -> None:
    for page in PAGES:
        for module in re.findall(r"python3? -m (hooks(?:\.[a-z_0-9]+)*)", page.read_text(encoding="utf-8")):
            base = ROOT / Path(*module.split("."))
            assert base.with_suffix(".py").is_file() or (base / "__main__.py").is_file(), (
                f"{page.name} runs python -m {module}, which is no module with a command")


def test_every_file_named_exists() -> None:
    for page in PAGES:
        for path in re.findall(rf"(?<![\w/.])((?:{'|'.join(map(re.escape, OURS))})[\w./*-]*[\w*])",
                               _code(page.read_text(encoding="utf-8"))):
            if path.startswith(CHECKOUT_TESTS):
                continue  # the checkout's: the system test a copy writes, MindSpeed-MM's own test index
            assert any(ROOT.glob(path.split("::")[0])), f"{page.name} names {path}, which does not exist"


def test_the_topics_table_lists_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `docs/([\w-]+\.md)` \|", text, re.MULTILINE))
    assert listed == {page.name for page in DOCS}
