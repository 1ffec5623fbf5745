"""Remote-code releases whose data code is not where a processor would be (issue 21), tier 1.

The published fixtures (tests/test_published_remote.py) need mirrors CI does not have; these tests hold the
rules on their own: a model card's quick-start yields exactly the function asked for and what it references
(never its script lines or unrelated imports), and a model without any way to build a sample, or whose
processor could not be evaluated, stops at the data-branch question instead of rendering.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hooks.data import model_card
from hooks.data.candidates import recommend, unbuildable
from hooks.model.facts import ModelFacts
from hooks.render.validators import branch_error
from tests.model_facts import stand_in_facts

CARD = '''---
license: mit
---
# A model

```bash
pip install decord
```

```python
import numpy as np
import torch
from decord import VideoReader, cpu
from PIL import Image
from transformers import AutoModel

MEAN = (0.5, 0.5, 0.5)
path = 'org/model'

def scale(x):
    return x * 2

def load_image(image_file, size=8):
    image = Image.open(image_file).convert('RGB').resize((size, size))
    return scale(torch.tensor(np.asarray(image), dtype=torch.float32)) - MEAN[0]

def load_video(video_path):
    return VideoReader(video_path, ctx=cpu(0))

model = AutoModel.from_pretrained(path, trust_remote_code=True).eval()
pixel_values = load_image('./examples/image1.jpg')
```
'''


def test_the_card_gives_the_function_and_what_it_references(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(CARD)
    text = model_card.module_text(tmp_path, "load_image")
    assert text is not None
    for kept in ("import numpy as np", "import torch", "from PIL import Image", "MEAN = (0.5, 0.5, 0.5)",
                 "def scale(x):", "def load_image(image_file, size=8):"):
        assert kept in text
    for dropped in ("decord", "AutoModel", "path = ", "load_video", "from_pretrained", "pixel_values ="):
        assert dropped not in text  # script lines and what load_image never reaches
    module = model_card.load_card(tmp_path, "load_image")
    from PIL import Image

    Image.new("RGB", (4, 4), "white").save(tmp_path / "white.png")
    assert module.load_image(tmp_path / "white.png").shape == (8, 8, 3)
    assert model_card.module_text(tmp_path, "dynamic_preprocess") is None


def test_no_card_no_module(tmp_path: Path) -> None:
    assert model_card.module_text(tmp_path, "load_image") is None


NO_DATA_CODE = stand_in_facts("qwen", {
    "class": "QWenTokenizer", "missing": True, "error": "no processor class",
    "problems": ["neither the model's code nor its model card (m/README.md code blocks) defines load_image"]})
UNEVALUATED = stand_in_facts("phi3_v", {
    "class": "Phi3VProcessor", "unevaluated": True, "sample_format": {"kind": "prompt", "end_of_turn": "</s>"},
    "error": "TypeError: expected string or bytes-like object, got 'list'"})
CODE = stand_in_facts("internvl_chat", {"missing": True, "problems": [], "sample_format": {"kind": "code"}})


def _fix(facts: ModelFacts) -> str:
    """What branch c's error tells the user to do: the part of the line after the reason it quotes."""
    line, why = branch_error("c", facts), unbuildable(facts)
    assert line.startswith("data_branch: ") and why in line, line
    return line.split(why, 1)[1]


def test_no_way_to_build_a_sample_stops_at_the_branch_question() -> None:
    for facts in (NO_DATA_CODE, UNEVALUATED):
        why = unbuildable(facts)
        assert why and "reproduces" not in recommend(facts, []).reason  # an error is never evidence
        assert "dataset plugin" in _fix(facts)  # the way out left: write it by hand
    # the reason itself may say "model card" (NO_DATA_CODE's does): the advice to add one is in the fix alone
    assert "model card" in _fix(NO_DATA_CODE) and "README.md" in _fix(NO_DATA_CODE)
    assert "model card" not in _fix(UNEVALUATED)
    # a folder whose card was read (Ovis2: its recipe is a model method) is not told to add one
    read_card = replace(NO_DATA_CODE, processor=replace(NO_DATA_CODE.processor, model_card=True))
    assert "model card" not in _fix(read_card)
    assert UNEVALUATED.processor.error in unbuildable(UNEVALUATED)  # the processor's own error, quoted
    assert unbuildable(CODE) == "" and branch_error("c", CODE) == ""
