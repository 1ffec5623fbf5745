"""Template files of the ``remote_vlm`` tiny model: a VLM written as Hugging Face *remote code*.

``hooks.tiny.remote`` saves a model built from these classes with
``register_for_auto_class``, so ``save_pretrained`` copies ``configuration_remote_vlm.py``,
``modeling_remote_vlm.py`` and ``processing_remote_vlm.py`` verbatim into the model
folder and writes the ``auto_map`` entries that make transformers load them with
``trust_remote_code=True``. Each file must therefore stay self-contained (only
relative imports between them), as files on the Hub are.
"""
