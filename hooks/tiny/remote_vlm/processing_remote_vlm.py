"""Processor of RemoteVLM: a standard image processor and tokenizer plus placeholder expansion.

The chat template writes one ``image_token`` per image; the model needs
``tokens_per_image`` of them (one per merged patch), so ``__call__`` expands each
placeholder before tokenizing. Images are resized to the fixed square the vision
tower was trained at, so every image costs the same number of tokens.
"""

from transformers.feature_extraction_utils import BatchFeature
from transformers.image_utils import ImageInput
from transformers.processing_utils import ProcessingKwargs, ProcessorMixin, Unpack
from transformers.tokenization_utils_base import PreTokenizedInput, TextInput


class RemoteVlmProcessorKwargs(ProcessingKwargs, total=False):
    _defaults = {"text_kwargs": {"padding": False}, "images_kwargs": {}}


class RemoteVlmProcessor(ProcessorMixin):
    """Wraps an ``AutoImageProcessor`` and an ``AutoTokenizer``; see the module docstring."""

    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(
        self,
        image_processor=None,
        tokenizer=None,
        chat_template: str | None = None,
        image_token: str = "<|media_pad|>",
        tokens_per_image: int = 4,
        **kwargs,
    ):
        self.image_token = image_token
        self.image_token_id = tokenizer.convert_tokens_to_ids(image_token)
        self.tokens_per_image = tokens_per_image
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(
        self,
        images: ImageInput | None = None,
        text: TextInput | PreTokenizedInput | list[TextInput] | list[PreTokenizedInput] | None = None,
        audio=None,
        videos=None,
        **kwargs: Unpack[RemoteVlmProcessorKwargs],
    ) -> BatchFeature:
        """Tokenize ``text`` (placeholders expanded) and turn ``images`` into ``pixel_values``."""
        if images is None and text is None:
            raise ValueError("You have to specify at least one of `images` or `text`.")
        output_kwargs = self._merge_kwargs(
            RemoteVlmProcessorKwargs, tokenizer_init_kwargs=self.tokenizer.init_kwargs, **kwargs
        )
        image_inputs = {}
        if images is not None:
            image_inputs = self.image_processor(images, **output_kwargs["images_kwargs"])
        if text is None:
            return BatchFeature(data=image_inputs)
        text = [text] if isinstance(text, str) else list(text)
        placeholders = sum(sample.count(self.image_token) for sample in text)
        images_given = len(image_inputs["pixel_values"]) if "pixel_values" in image_inputs else 0
        if placeholders != images_given:
            raise ValueError(f"{placeholders} {self.image_token} placeholders in the text but {images_given} images")
        expanded = [sample.replace(self.image_token, self.image_token * self.tokens_per_image) for sample in text]
        return_tensors = output_kwargs["text_kwargs"].pop("return_tensors", None)
        text_inputs = self.tokenizer(expanded, **output_kwargs["text_kwargs"], return_tensors=None)
        return BatchFeature(data={**text_inputs, **image_inputs}, tensor_type=return_tensors)

    @property
    def model_input_names(self) -> list[str]:
        names = self.tokenizer.model_input_names + self.image_processor.model_input_names
        return list(dict.fromkeys(names))


__all__ = ["RemoteVlmProcessor"]
