"""Model facts for tests of a later stage, written by hand: a test double of the probe's facts.

The fields a test names, the rest empty; ``processor`` as the answers file writes it (``ProcessorFacts.to_dict``).
Tests that need the real facts of a model probe a tiny build instead (``tests/conftest.py``).
"""

from __future__ import annotations

import json
from typing import Any

from hooks.model.facts import ModelFacts
from hooks.model.plan import Plan
from hooks.model.processor_facts import ProcessorFacts


def stand_in_facts(model_type: str = "stand_in", processor: dict[str, Any] | None = None,
                   plan: dict[str, Any] | None = None, **fields: Any) -> ModelFacts:
    """A test double of ``ModelFacts``: ``model_type``, ``processor`` and the given fields; an empty plan."""
    base: dict[str, Any] = dict(
        model_type=model_type, architecture="StandInForConditionalGeneration", class_module="transformers.stand_in",
        remote_code=False, sub_configs={}, num_parameters=0, forward_params=[], forward_accepts_kwargs=False,
        returns_loss=True, tie_word_embeddings=False, no_split_modules=[], media_tokens={})
    base.update(fields)
    empty = {"apply_modules": [], "recompute_modules": [], "ep_modules": [], "hook_modules": [],
             "freeze_proposal": [], "vision_towers": [], "language_tower": None, "reports": [],
             "non_root_share": 0.0, "problems": []}
    return ModelFacts(**base, plan=Plan.from_dict({**empty, **(plan or {})}),
                      processor=ProcessorFacts.from_dict(processor))


def stand_in_answers_facts(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """``stand_in_facts`` as an answers file holds them (``model_facts``)."""
    return json.loads(stand_in_facts(*args, **kwargs).to_json(with_timings=False))
