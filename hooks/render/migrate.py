"""``python -m hooks.render.migrate ANSWERS --rename OLD=NEW``: answers that move between template versions.

copier's ``_migrations`` (``copier.yml``) run this before an update renders the new version: an answer
that was renamed keeps the user's value (0.2.0: ``npus_per_node`` became ``devices_per_node``, which sizes
the memory plan too). The answers file is edited as text, one top-level key line, so its layout and
comments stay as copier wrote them; a file without the old key is left as it is.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path


def rename_answer(text: str, old: str, new: str) -> str:
    """``text`` with the top-level key ``old:`` renamed ``new:`` (unless ``new`` is there already)."""
    if re.search(rf"^{re.escape(new)}:", text, flags=re.MULTILINE):
        return text
    return re.sub(rf"^{re.escape(old)}:", f"{new}:", text, count=1, flags=re.MULTILINE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.render.migrate", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, help=".copier-answers/<model_id>.yml")
    parser.add_argument("--rename", action="append", default=[], metavar="OLD=NEW")
    args = parser.parse_args(argv)
    if not args.answers.is_file():  # a replay in a temporary folder: nothing to migrate there
        return 0
    text = args.answers.read_text(encoding="utf-8")
    for pair in args.rename:
        old, _, new = pair.partition("=")
        text = rename_answer(text, old, new)
    args.answers.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
