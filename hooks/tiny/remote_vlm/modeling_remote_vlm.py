"""RemoteVLM: a small vision-language model shipped as Hugging Face remote code.

Layout (module names as ``named_modules()`` shows them)::

    vision_tower            RemoteVlmVisionModel: patch_embed, pos_embed, blocks.{i}, post_layernorm
    mm_projector            RemoteVlmProjector: merges 2x2 patches into one language-model token
    language_model          RemoteVlmTextModel: embed_tokens, layers.{i}, norm
    lm_head                 vocabulary projection

Each image becomes ``config.tokens_per_image`` features that replace the same number
of ``image_token_id`` placeholders in ``input_ids`` (the processor expands one
placeholder per image). Attention goes through transformers' attention interface,
so ``eager``, ``sdpa`` and registered kernels (e.g. MindSpeed-MM's flash attention)
all work.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.masking_utils import create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_remote_vlm import RemoteVlmConfig, RemoteVlmTextConfig, RemoteVlmVisionConfig


@dataclass
class RemoteVlmCausalLMOutput(ModelOutput):
    """Language-modelling output; ``loss`` is set when ``labels`` are given."""

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    image_hidden_states: torch.FloatTensor | None = None


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain softmax attention; ``key``/``value`` may have fewer heads (grouped-query attention)."""
    groups = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(groups, dim=1)
    value = value.repeat_interleave(groups, dim=1)
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask[:, :, :, : key.shape[-2]]
    weights = nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


def _attention_function(config) -> Callable:
    """The kernel named by ``config._attn_implementation`` (eager when unset)."""
    name = getattr(config, "_attn_implementation", None) or "eager"
    return eager_attention_forward if name == "eager" else ALL_ATTENTION_FUNCTIONS[name]


# ---------------------------------------------------------------------------- vision tower


class RemoteVlmVisionAttention(nn.Module):
    """Bidirectional multi-head self-attention over the patches of one image."""

    def __init__(self, config: RemoteVlmVisionConfig):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.num_key_value_groups = 1
        self.scaling = self.head_dim**-0.5
        self.is_causal = False
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        batch, length, _ = hidden_states.shape
        qkv = self.qkv(hidden_states).view(batch, length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attn = _attention_function(self.config)
        output, _ = attn(self, query, key, value, None, scaling=self.scaling, dropout=0.0, is_causal=False)
        return self.proj(output.reshape(batch, length, -1))


class RemoteVlmVisionMLP(nn.Module):
    def __init__(self, config: RemoteVlmVisionConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(hidden_states)))


class RemoteVlmVisionBlock(GradientCheckpointingLayer):
    """Pre-norm transformer block of the vision tower."""

    def __init__(self, config: RemoteVlmVisionConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attn = RemoteVlmVisionAttention(config)
        self.norm2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = RemoteVlmVisionMLP(config)

    def forward(self, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        hidden_states = hidden_states + self.attn(self.norm1(hidden_states), **kwargs)
        return hidden_states + self.mlp(self.norm2(hidden_states))


class RemoteVlmVisionModel(nn.Module):
    """Patchify, add learned positions, run the blocks; returns (images, rows, cols, hidden)."""

    def __init__(self, config: RemoteVlmVisionConfig):
        super().__init__()
        self.config = config
        self.grid = config.image_size // config.patch_size
        self.patch_embed = nn.Conv2d(
            config.num_channels, config.hidden_size, kernel_size=config.patch_size, stride=config.patch_size
        )
        self.pos_embed = nn.Embedding(self.grid * self.grid, config.hidden_size)
        self.blocks = nn.ModuleList(RemoteVlmVisionBlock(config) for _ in range(config.num_hidden_layers))
        self.post_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, pixel_values: torch.Tensor, **kwargs) -> torch.Tensor:
        patches = self.patch_embed(pixel_values.to(self.patch_embed.weight.dtype))
        hidden_states = patches.flatten(2).transpose(1, 2)
        positions = torch.arange(hidden_states.shape[1], device=hidden_states.device)
        hidden_states = hidden_states + self.pos_embed(positions)
        for block in self.blocks:
            hidden_states = block(hidden_states, **kwargs)
        hidden_states = self.post_layernorm(hidden_states)
        return hidden_states.view(hidden_states.shape[0], self.grid, self.grid, -1)


class RemoteVlmProjector(nn.Module):
    """Concatenate each ``merge_size`` x ``merge_size`` patch neighbourhood and map it to the LM width."""

    def __init__(self, config: RemoteVlmConfig):
        super().__init__()
        self.merge_size = config.merge_size
        merged = config.vision_config.hidden_size * config.merge_size**2
        self.norm = nn.LayerNorm(merged, eps=config.vision_config.layer_norm_eps)
        self.linear_1 = nn.Linear(merged, config.text_config.hidden_size)
        self.act = ACT2FN[config.projector_hidden_act]
        self.linear_2 = nn.Linear(config.text_config.hidden_size, config.text_config.hidden_size)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        images, rows, cols, hidden = features.shape
        m = self.merge_size
        features = features.view(images, rows // m, m, cols // m, m, hidden).permute(0, 1, 3, 2, 4, 5)
        features = features.reshape(-1, m * m * hidden)
        return self.linear_2(self.act(self.linear_1(self.norm(features))))


# ---------------------------------------------------------------------------- language model


class RemoteVlmRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(dtype)


def rotary_cos_sin(config: RemoteVlmTextConfig, position_ids: torch.Tensor, dtype: torch.dtype):
    """cos/sin tables for ``position_ids`` (computed on the fly: no buffer to materialise after meta init)."""
    head_dim = config.hidden_size // config.num_attention_heads
    steps = torch.arange(0, head_dim, 2, device=position_ids.device, dtype=torch.float32)
    inv_freq = 1.0 / (config.rope_theta ** (steps / head_dim))
    freqs = position_ids[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


class RemoteVlmAttention(nn.Module):
    """Causal grouped-query attention with rotary positions."""

    def __init__(self, config: RemoteVlmTextConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.is_causal = True
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None,
        **kwargs,
    ) -> torch.Tensor:
        batch, length, _ = hidden_states.shape
        query = self.q_proj(hidden_states).view(batch, length, -1, self.head_dim).transpose(1, 2)
        key = self.k_proj(hidden_states).view(batch, length, -1, self.head_dim).transpose(1, 2)
        value = self.v_proj(hidden_states).view(batch, length, -1, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        query, key = apply_rotary(query, cos, sin), apply_rotary(key, cos, sin)
        attn = _attention_function(self.config)
        dropout = self.config.attention_dropout if self.training else 0.0
        output, _ = attn(self, query, key, value, attention_mask, scaling=self.scaling, dropout=dropout, **kwargs)
        return self.o_proj(output.reshape(batch, length, -1))


class RemoteVlmMLP(nn.Module):
    def __init__(self, config: RemoteVlmTextConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class RemoteVlmDecoderLayer(GradientCheckpointingLayer):
    def __init__(self, config: RemoteVlmTextConfig, layer_idx: int):
        super().__init__()
        self.input_layernorm = RemoteVlmRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.self_attn = RemoteVlmAttention(config, layer_idx)
        self.post_attention_layernorm = RemoteVlmRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = RemoteVlmMLP(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        residual = hidden_states
        hidden_states = self.self_attn(self.input_layernorm(hidden_states), position_embeddings, attention_mask,
                                       **kwargs)
        hidden_states = residual + hidden_states
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class RemoteVlmTextModel(nn.Module):
    """Token embedding, decoder layers and the final norm (no head)."""

    def __init__(self, config: RemoteVlmTextConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(RemoteVlmDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RemoteVlmRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        length = inputs_embeds.shape[1]
        cache_position = torch.arange(length, device=inputs_embeds.device)
        if position_ids is None:
            position_ids = cache_position.unsqueeze(0).expand(inputs_embeds.shape[0], -1)
        mask = create_causal_mask(
            config=self.config,
            input_embeds=inputs_embeds,
            attention_mask=attention_mask,
            cache_position=cache_position,
            past_key_values=None,
            position_ids=position_ids,
        )
        position_embeddings = rotary_cos_sin(self.config, position_ids, inputs_embeds.dtype)
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings, mask, position_ids=position_ids, **kwargs)
        return self.norm(hidden_states)


# ---------------------------------------------------------------------------- the VLM


class RemoteVlmPreTrainedModel(PreTrainedModel):
    config_class = RemoteVlmConfig
    base_model_prefix = ""
    supports_gradient_checkpointing = True
    _no_split_modules = ["RemoteVlmVisionBlock", "RemoteVlmDecoderLayer"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_attention_backend = True

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()
        elif isinstance(module, RemoteVlmRMSNorm):
            module.weight.data.fill_(1.0)


class RemoteVlmForConditionalGeneration(RemoteVlmPreTrainedModel):
    """Vision tower + projector + decoder-only language model + head; ``forward`` returns ``.loss``."""

    _tied_weights_keys = ["lm_head.weight"]

    def __init__(self, config: RemoteVlmConfig):
        super().__init__(config)
        self.vision_tower = RemoteVlmVisionModel(config.vision_config)
        self.mm_projector = RemoteVlmProjector(config)
        self.language_model = RemoteVlmTextModel(config.text_config)
        self.lm_head = nn.Linear(config.text_config.hidden_size, config.text_config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.language_model.embed_tokens

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.language_model.embed_tokens = value

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Module) -> None:
        self.lm_head = value

    def get_image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """One row per image placeholder token: (images * tokens_per_image, text hidden)."""
        return self.mm_projector(self.vision_tower(pixel_values))

    def _merge_image_features(self, input_ids: torch.Tensor, embeds: torch.Tensor,
                              pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.get_image_features(pixel_values).to(embeds.dtype)
        mask = input_ids == self.config.image_token_id
        if int(mask.sum()) != features.shape[0]:
            raise ValueError(
                f"{int(mask.sum())} image placeholder tokens but {features.shape[0]} image features; "
                "the processor must expand each image placeholder to config.tokens_per_image tokens"
            )
        embeds = embeds.masked_scatter(mask.unsqueeze(-1).expand_as(embeds), features)
        return embeds, features

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> RemoteVlmCausalLMOutput:
        kwargs.pop("use_cache", None)  # no KV cache: this model is for training and scoring
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        image_features = None
        if pixel_values is not None and input_ids is not None:
            inputs_embeds, image_features = self._merge_image_features(input_ids, inputs_embeds, pixel_values)
        hidden_states = self.language_model(
            inputs_embeds=inputs_embeds, attention_mask=attention_mask, position_ids=position_ids
        )
        logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            loss = self.loss_function(
                logits=logits, labels=labels, vocab_size=self.config.text_config.vocab_size, **kwargs
            )
        return RemoteVlmCausalLMOutput(loss=loss, logits=logits, image_hidden_states=image_features)


__all__ = ["RemoteVlmForConditionalGeneration", "RemoteVlmPreTrainedModel"]
