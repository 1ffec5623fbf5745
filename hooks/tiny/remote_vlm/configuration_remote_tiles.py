"""Configuration of RemoteTiles: remote_vlm's towers, tiles of ``image_size`` pixels."""

import torch
from transformers import PretrainedConfig

from .configuration_remote_vlm import RemoteVlmTextConfig, RemoteVlmVisionConfig


class RemoteTilesConfig(PretrainedConfig):
    """Vision tower on 64-pixel tiles, 2x2 patch merging, language model; dtypes kept as torch objects."""

    model_type = "remote_tiles"
    sub_configs = {"vision_config": RemoteVlmVisionConfig, "text_config": RemoteVlmTextConfig}

    def __init__(self, vision_config=None, text_config=None, merge_size=2, projector_hidden_act="gelu",
                 max_dynamic_patch=4, use_thumbnail=True, drop_path_rate=0.1, vision_dtype="float32",
                 initializer_range=0.02, **kwargs):
        if isinstance(vision_config, dict):
            vision_config = RemoteVlmVisionConfig(**vision_config)
        if isinstance(text_config, dict):
            text_config = RemoteVlmTextConfig(**text_config)
        self.vision_config = vision_config if vision_config is not None else RemoteVlmVisionConfig()
        self.text_config = text_config if text_config is not None else RemoteVlmTextConfig()
        self.merge_size = merge_size
        self.projector_hidden_act = projector_hidden_act
        self.max_dynamic_patch = max_dynamic_patch
        self.use_thumbnail = use_thumbnail
        self.drop_path_rate = drop_path_rate
        # As published code does: a dtype object in the config (to_dict() then is not JSON-clean).
        self.vision_dtype = getattr(torch, vision_dtype) if isinstance(vision_dtype, str) else vision_dtype
        self.initializer_range = initializer_range
        super().__init__(**kwargs)

    @property
    def tokens_per_tile(self) -> int:
        side = self.vision_config.image_size // self.vision_config.patch_size // self.merge_size
        return side * side

    def to_json_string(self, use_diff: bool = True) -> str:
        """config.json keeps the dtype's name; ``to_dict()`` (what tools read) keeps the object."""
        data = self.to_diff_dict() if use_diff else self.to_dict()
        data = {k: (str(v).removeprefix("torch.") if isinstance(v, torch.dtype) else v) for k, v in data.items()}
        import json

        return json.dumps(data, indent=2, sort_keys=True) + "\n"


__all__ = ["RemoteTilesConfig"]
