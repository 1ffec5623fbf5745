"""Configuration of RemoteVLM, a small vision-language model shipped as Hugging Face remote code.

Three classes, as most remote-code VLMs have them: a vision tower config, a
decoder-only language model config, and the composite config that names both as
``sub_configs`` (so ``attn_implementation`` and dtype reach every part). The
defaults describe a full-size model (~1.5B parameters); only the image geometry
is small (64x64 images in 16x16 patches).
"""

from transformers.configuration_utils import PretrainedConfig


class RemoteVlmVisionConfig(PretrainedConfig):
    """ViT-like encoder: square patches, learned positions, pre-norm blocks."""

    model_type = "remote_vlm_vision"
    base_config_key = "vision_config"

    def __init__(
        self,
        hidden_size: int = 1024,
        intermediate_size: int = 4096,
        num_hidden_layers: int = 24,
        num_attention_heads: int = 16,
        num_channels: int = 3,
        image_size: int = 64,
        patch_size: int = 16,
        layer_norm_eps: float = 1e-6,
        hidden_act: str = "gelu_pytorch_tanh",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_channels = num_channels
        self.image_size = image_size
        self.patch_size = patch_size
        self.layer_norm_eps = layer_norm_eps
        self.hidden_act = hidden_act


class RemoteVlmTextConfig(PretrainedConfig):
    """Llama-like decoder: RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP."""

    model_type = "remote_vlm_text"
    base_config_key = "text_config"

    def __init__(
        self,
        vocab_size: int = 32000,
        hidden_size: int = 2048,
        intermediate_size: int = 5632,
        num_hidden_layers: int = 24,
        num_attention_heads: int = 16,
        num_key_value_heads: int = 4,
        max_position_embeddings: int = 4096,
        rope_theta: float = 10000.0,
        rms_norm_eps: float = 1e-6,
        hidden_act: str = "silu",
        attention_dropout: float = 0.0,
        initializer_range: float = 0.02,
        tie_word_embeddings: bool = False,
        **kwargs,
    ):
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.hidden_act = hidden_act
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range


class RemoteVlmConfig(PretrainedConfig):
    """The whole model: vision tower, a 2x2 patch-merging projector and the language model."""

    model_type = "remote_vlm"
    sub_configs = {"vision_config": RemoteVlmVisionConfig, "text_config": RemoteVlmTextConfig}

    def __init__(
        self,
        vision_config: dict | RemoteVlmVisionConfig | None = None,
        text_config: dict | RemoteVlmTextConfig | None = None,
        image_token_id: int = 0,
        merge_size: int = 2,
        projector_hidden_act: str = "gelu",
        initializer_range: float = 0.02,
        tie_word_embeddings: bool = False,
        **kwargs,
    ):
        if isinstance(vision_config, dict):
            vision_config = RemoteVlmVisionConfig(**vision_config)
        if isinstance(text_config, dict):
            text_config = RemoteVlmTextConfig(**text_config)
        self.vision_config = vision_config if vision_config is not None else RemoteVlmVisionConfig()
        self.text_config = text_config if text_config is not None else RemoteVlmTextConfig()
        self.text_config.tie_word_embeddings = tie_word_embeddings  # the head follows the composite config
        self.image_token_id = image_token_id
        self.merge_size = merge_size
        self.projector_hidden_act = projector_hidden_act
        self.initializer_range = initializer_range
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)

    @property
    def tokens_per_image(self) -> int:
        """Placeholder tokens one image becomes: patches per side, merged ``merge_size`` x ``merge_size``."""
        side = self.vision_config.image_size // self.vision_config.patch_size // self.merge_size
        return side * side


__all__ = ["RemoteVlmConfig", "RemoteVlmTextConfig", "RemoteVlmVisionConfig"]
