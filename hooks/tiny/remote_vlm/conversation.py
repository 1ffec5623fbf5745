"""The chat format, in Python (no Jinja chat template), as InternVL-Chat-style releases ship it."""

from dataclasses import dataclass, field


@dataclass
class Conversation:
    """ChatML turns; the system message is always written (a default one when none is given)."""

    system_message: str = "You are a helpful assistant."
    roles: tuple = ("<|im_start|>user\n", "<|im_start|>assistant\n")
    sep: str = "<|im_end|>\n"
    messages: list = field(default_factory=list)

    def append_message(self, role: str, message: str | None) -> None:
        self.messages.append([role, message])

    def get_prompt(self) -> str:
        text = f"<|im_start|>system\n{self.system_message}{self.sep}"
        for role, message in self.messages:
            text += role + (message + self.sep if message is not None else "")
        return text


def get_conv_template(name: str = "tiles-chat") -> Conversation:
    return Conversation()
