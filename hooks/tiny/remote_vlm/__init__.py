"""Template files of the ``remote_vlm`` and ``remote_tiles`` tiny models: VLMs written as Hugging Face
*remote code*.

``hooks.tiny.remote`` saves a model built from these classes with
``register_for_auto_class``, so ``save_pretrained`` copies ``configuration_remote_vlm.py``,
``modeling_remote_vlm.py`` and ``processing_remote_vlm.py`` verbatim into the model
folder and writes the ``auto_map`` entries that make transformers load them with
``trust_remote_code=True``. Each file must therefore stay self-contained (only
relative imports between them), as files on the Hub are.

``remote_tiles`` (``configuration_remote_tiles.py``, ``modeling_remote_tiles.py``,
``conversation.py``) is remote code as model-only releases really ship it. Modelled on
InternVL-Chat-style releases, it carries each failure class a tool meets on such code
(issue 11), so every one has a test:

- ``__init__`` calls ``.item()`` on a freshly built tensor (stochastic-depth rates): fails on the
  meta device, works under ``accelerate.init_empty_weights()``;
- the modeling file prints on import (on stdout);
- ``config.to_dict()`` holds a ``torch.dtype`` object (``vision_dtype``);
- the class declares neither SDPA nor flash attention, and ``__init__`` switches the language
  model to SDPA itself;
- no processor class: the tokenizer and a Python conversation template (``conversation.py``), the
  image tiling (``dynamic_preprocess``) in the modeling file;
- ``forward`` takes a per-tile ``image_flags`` tensor and needs ``img_context_token_id``, a model
  attribute the model's own ``chat()`` sets.

The language model, vision tower and projector are ``remote_vlm``'s, imported relatively (the
folder holds both files, as Hub folders share code between files).
"""
