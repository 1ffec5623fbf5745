"""RemoteTiles: images as dynamic tiles plus a thumbnail, each tile flagged, InternVL-Chat style.

Layout (``named_modules()``): ``vision_tower`` (blocks.{i}), ``mm_projector``, ``language_model``
(embed_tokens, layers.{i}, norm), ``lm_head``. Each tile becomes ``config.tokens_per_image``
features that replace the same number of ``<IMG_CONTEXT>`` tokens; ``image_flags`` marks real
tiles (0 for the stand-in tile of a text-only sample).
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers.modeling_utils import PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_remote_tiles import RemoteTilesConfig
from .conversation import get_conv_template
from .modeling_remote_vlm import RemoteVlmProjector, RemoteVlmRMSNorm, RemoteVlmTextModel, RemoteVlmVisionModel

print("RemoteTiles: loading custom code")  # published code prints on import; tools must not read stdout

IMG_START, IMG_END, IMG_CONTEXT = "<img>", "</img>", "<IMG_CONTEXT>"
MEAN, STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)


def dynamic_preprocess(image, tile: int, max_num: int, use_thumbnail: bool) -> list:
    """Split ``image`` into the grid of ``tile``-pixel tiles closest to its aspect ratio (at most
    ``max_num`` tiles), plus a thumbnail of the whole image when there is more than one tile."""
    width, height = image.size
    ratios = sorted({(i, j) for n in range(1, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                     if i * j <= max_num}, key=lambda r: r[0] * r[1])
    cols, rows = min(ratios, key=lambda r: (abs(r[0] / r[1] - width / height), -r[0] * r[1]))
    resized = image.resize((cols * tile, rows * tile))
    tiles = [resized.crop((c * tile, r * tile, (c + 1) * tile, (r + 1) * tile)) for r in range(rows)
             for c in range(cols)]
    if use_thumbnail and len(tiles) > 1:
        tiles.append(image.resize((tile, tile)))
    return tiles


def load_image(image, tile: int = 64, max_num: int = 4, use_thumbnail: bool = True) -> torch.Tensor:
    """``pixel_values`` of one image: (tiles, 3, tile, tile), normalised."""
    import numpy as np

    tiles = dynamic_preprocess(image.convert("RGB"), tile, max_num, use_thumbnail)
    array = np.stack([np.asarray(t, dtype=np.float32) / 255.0 for t in tiles])
    array = (array - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)
    return torch.from_numpy(array).permute(0, 3, 1, 2).contiguous()


@dataclass
class RemoteTilesOutput(ModelOutput):
    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None


class RemoteTilesForCausalLM(PreTrainedModel):
    """Tiles through the vision tower, merged into the text at ``img_context_token_id``; declares no SDPA."""

    config_class = RemoteTilesConfig
    base_model_prefix = ""
    supports_gradient_checkpointing = True
    _no_split_modules = ["RemoteVlmVisionBlock", "RemoteVlmDecoderLayer"]

    def __init__(self, config: RemoteTilesConfig):
        super().__init__(config)
        # Stochastic-depth rates as Python floats: .item() on a fresh tensor (fails on the meta device).
        self.drop_path_rates = [x.item() for x in torch.linspace(0, config.drop_path_rate,
                                                                 config.vision_config.num_hidden_layers)]
        config.text_config._attn_implementation = "sdpa"  # picks its own attention, silently
        self.vision_tower = RemoteVlmVisionModel(config.vision_config)
        self.mm_projector = RemoteVlmProjector(config)
        self.language_model = RemoteVlmTextModel(config.text_config)
        self.lm_head = nn.Linear(config.text_config.hidden_size, config.text_config.vocab_size, bias=False)
        self.img_context_token_id = None  # set by chat(), as the published code does
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Conv2d, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
            if getattr(module, "bias", None) is not None:
                module.bias.data.zero_()
        elif isinstance(module, (nn.LayerNorm, RemoteVlmRMSNorm)):
            module.weight.data.fill_(1.0)
            if getattr(module, "bias", None) is not None:
                module.bias.data.zero_()

    def get_input_embeddings(self) -> nn.Module:
        return self.language_model.embed_tokens

    def extract_feature(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.mm_projector(self.vision_tower(pixel_values.to(self.config.vision_dtype)))

    def forward(self, pixel_values: torch.FloatTensor, input_ids: torch.LongTensor,
                attention_mask: torch.Tensor | None = None, position_ids: torch.LongTensor | None = None,
                image_flags: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                **kwargs) -> RemoteTilesOutput:
        embeds = self.get_input_embeddings()(input_ids)
        features = self.extract_feature(pixel_values).view(pixel_values.shape[0], -1, embeds.shape[-1])
        features = features[image_flags.squeeze(-1) == 1].reshape(-1, embeds.shape[-1]).to(embeds.dtype)
        selected = (input_ids == self.img_context_token_id).reshape(-1)
        flat = embeds.reshape(-1, embeds.shape[-1])
        try:
            flat = flat.masked_scatter(selected.unsqueeze(-1), features)
        except RuntimeError:  # as published: a count mismatch is swallowed, the images then do nothing
            flat = flat + 0.0 * features.sum()
        hidden = self.language_model(inputs_embeds=flat.view_as(embeds), attention_mask=attention_mask,
                                     position_ids=position_ids)
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.text_config.vocab_size)
        return RemoteTilesOutput(loss=loss, logits=logits)

    def chat(self, tokenizer, pixel_values: torch.Tensor, question: str, generation_config: dict | None = None):
        """The published entry point: sets ``img_context_token_id``, expands ``<image>``, runs the model."""
        self.img_context_token_id = tokenizer.convert_tokens_to_ids(IMG_CONTEXT)
        if "<image>" not in question:
            question = "<image>\n" + question
        conv = get_conv_template()
        conv.append_message(conv.roles[0], question)
        conv.append_message(conv.roles[1], None)
        image = IMG_START + IMG_CONTEXT * self.config.tokens_per_image * pixel_values.shape[0] + IMG_END
        ids = tokenizer(conv.get_prompt().replace("<image>", image, 1), return_tensors="pt")["input_ids"]
        flags = torch.ones(pixel_values.shape[0], 1, dtype=torch.long)
        return self(pixel_values=pixel_values, input_ids=ids, image_flags=flags).logits


__all__ = ["RemoteTilesForCausalLM"]
