"""The layout of a skeleton file the user fills in: a docstring stating the contract with the model's own figures,
then the function, raising until it is written. Shared by the tile builder (``hooks.data.builder``) and the prompt
builder (``hooks.data.prompt_builder``)."""

from __future__ import annotations

import textwrap
from pathlib import Path


def skeleton_file(model_dir: Path, function: str, *, kind: str, contract: str, figures: str, advice: str,
                  imports: str, signature: str, doc: str, todo: str) -> str:
    """The text of a skeleton file: a docstring stating ``contract`` with the model's ``figures`` (already indented
    bullets) and ``advice``, then ``function`` whose body raises ``todo`` until the user writes it. One layout for
    both contracts (image tiles here, the whole prompt in ``hooks.data.prompt_builder``)."""
    return (f'"""{kind} for {Path(model_dir).name} (msmm-migrate: -d sample_builder=THIS_FILE:{function}).\n\n'
            + textwrap.fill(f"Contract: {function}{contract}.", 100) + "\n"
            f"This model:\n{figures}\n\n{advice}\n\"\"\"\n\n{imports}\n\n\n"
            f"def {function}{signature}:\n"
            f'    """{doc}"""\n'
            f'    raise NotImplementedError("{todo}")\n')
