"""Configuration of RemoteTiles: remote_vlm's configuration, on tiles of ``image_size`` pixels."""

import json

import torch

from .configuration_remote_vlm import RemoteVlmConfig


class RemoteTilesConfig(RemoteVlmConfig):
    """remote_vlm's towers and 2x2 merging, plus tiling; dtypes kept as torch objects."""

    model_type = "remote_tiles"

    def __init__(self, max_dynamic_patch=4, use_thumbnail=True, drop_path_rate=0.1, vision_dtype="float32", **kwargs):
        self.max_dynamic_patch = max_dynamic_patch
        self.use_thumbnail = use_thumbnail
        self.drop_path_rate = drop_path_rate
        # As published code does: a dtype object in the config (to_dict() then is not JSON-clean).
        self.vision_dtype = getattr(torch, vision_dtype) if isinstance(vision_dtype, str) else vision_dtype
        super().__init__(**kwargs)

    def to_json_string(self, use_diff: bool = True) -> str:
        """config.json keeps the dtype's name; ``to_dict()`` (what tools read) keeps the object."""
        data = self.to_diff_dict() if use_diff else self.to_dict()
        data = {k: (str(v).removeprefix("torch.") if isinstance(v, torch.dtype) else v) for k, v in data.items()}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


__all__ = ["RemoteTilesConfig"]
