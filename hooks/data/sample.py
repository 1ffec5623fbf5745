"""The smoke's generated sample: eight image/chat pairs in MindSpeed-MM's ``huggingface`` format.

Used when the user gives no ``data_json``: small enough to train in seconds, varied enough (a
different answer per picture) that the labels carry a real training signal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_DEMO_COLORS: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("red", (220, 30, 30)),
    ("green", (30, 180, 60)),
    ("blue", (40, 60, 220)),
    ("yellow", (235, 220, 40)),
    ("purple", (140, 50, 170)),
    ("orange", (245, 140, 20)),
    ("white", (245, 245, 245)),
    ("black", (15, 15, 15)),
)
_DEMO_QUESTIONS = (
    "What color is this?",
    "Which color fills most of the picture?",
    "Describe the image in a few words.",
)


def _demo_image(i: int) -> tuple[Any, str]:
    """A 64x64 picture: a background colour with a smaller square of another colour."""
    from PIL import Image, ImageDraw

    name, rgb = _DEMO_COLORS[i % len(_DEMO_COLORS)]
    inner_name, inner_rgb = _DEMO_COLORS[(i * 3 + 1) % len(_DEMO_COLORS)]
    img = Image.new("RGB", (64, 64), rgb)
    offset = 8 + (i % 4) * 6
    ImageDraw.Draw(img).rectangle([offset, offset, offset + 20, offset + 20], fill=inner_rgb)
    answer = f"Mostly {name}, with a small {inner_name} square."
    return img, answer


def _media_sample(dest: Path, i: int, seed: int, takes: tuple[str, ...]) -> dict[str, Any]:
    """Sample ``i`` with the media ``takes`` names: an image (as before audio), a clip, or both."""
    if takes == ("image",):
        img, answer = _demo_image(i + seed)
        rel = f"images/img_{i}.png"
        img.save(dest / rel, format="PNG")
        return _demo_sample(i, rel, answer)
    wave, heard = demo_audio(i + seed)
    rel = f"audios/tone_{i}.wav"
    write_wav(dest / rel, wave)
    sample = {"messages": [{"role": "user", "content": f"<audio>{_AUDIO_QUESTIONS[i % len(_AUDIO_QUESTIONS)]}"},
                           {"role": "assistant", "content": heard}], "audios": [rel], "images": []}
    if "image" in takes:
        img, seen = _demo_image(i + seed)
        sample["images"] = [f"images/img_{i}.png"]
        img.save(dest / sample["images"][0], format="PNG")
        sample["messages"] = [{"role": "user", "content": "<audio><image>Describe what you hear and see."},
                              {"role": "assistant", "content": f"{heard} {seen}"}]
    return sample


def _demo_sample(i: int, image_rel: str, answer: str) -> dict[str, Any]:
    """One sample in MindSpeed-MM's ``huggingface`` dataset format."""
    question = _DEMO_QUESTIONS[i % len(_DEMO_QUESTIONS)]
    return {
        "messages": [
            {"role": "user", "content": f"<image>{question}"},
            {"role": "assistant", "content": answer},
        ],
        "images": [image_rel],
    }


_AUDIO_QUESTIONS = (
    "What do you hear?",
    "Which pitch is this sound?",
    "Describe the sound in a few words.",
)


def demo_media(media: tuple[str, ...] | list[str]) -> str:
    """What ``build_demo_dataset`` writes for a model that takes ``media``, in words (the smoke's data note)."""
    if "audio" not in media:
        return "8 image/chat pairs (64x64 images)"
    if "image" not in media:
        return "8 audio/chat pairs (1.5 s tones, 16 kHz WAV)"
    return "8 chats with an image, a clip or both (64x64 images, 1.5 s tones)"


def build_demo_dataset(dest: Path, *, samples: int = 8, seed: int = 0,
                       media: tuple[str, ...] | list[str] = ("image",)) -> Path:
    """Write ``dest/images/img_{i}.png`` (and ``dest/audios/tone_{i}.wav``) and ``dest/data.json``; return the
    JSON path.

    Images are drawn and tones synthesised deterministically (``seed`` rotates the assignment) so reruns
    produce byte-identical files; answers differ per sample so the labels carry a real training signal. For a
    model that takes audio (``media``) every sample has a clip, for one that takes both, every third sample is
    an image alone, a clip alone, or both (and the answer names both).
    """
    dest = Path(dest)
    (dest / "images").mkdir(parents=True, exist_ok=True)
    if "audio" in media:
        (dest / "audios").mkdir(parents=True, exist_ok=True)
    data = []
    for i in range(samples):
        takes = ("image",) if "audio" not in media else ("audio",) if "image" not in media else (
            ("image",), ("audio",), ("audio", "image"))[i % 3]
        data.append(_media_sample(dest, i, seed, takes))
        if "audio" in media:  # every record with both columns: the framework's dataset reads one schema
            data[-1].setdefault("audios", [])
    out = dest / "data.json"
    out.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return out




SAMPLING_RATE = 16000  # what the releases' feature extractors and MindSpeed-MM's audio_sampling_rate default to
_DEMO_TONES: tuple[tuple[str, float], ...] = (
    ("low", 220.0), ("middle", 440.0), ("high", 880.0), ("very high", 1760.0),
)


def demo_audio(i: int, seconds: float = 1.5) -> tuple[Any, str]:
    """A tone of one of four pitches (float32 in [-1, 1] at ``SAMPLING_RATE``), and an answer naming it."""
    import numpy as np

    name, hertz = _DEMO_TONES[i % len(_DEMO_TONES)]
    time = np.arange(int(seconds * SAMPLING_RATE)) / SAMPLING_RATE
    wave = 0.4 * np.sin(2 * np.pi * hertz * time) * np.minimum(1.0, 8 * (seconds - time))  # a short fade-out
    return wave.astype(np.float32), f"A {name} tone, about {hertz:.0f} hertz."


def write_wav(path: Path, wave: Any, rate: int = SAMPLING_RATE) -> None:
    """``wave`` (floats in [-1, 1]) as a 16-bit mono PCM WAV file: what every audio loader reads (the standard
    library writes it, so building data needs no audio package)."""
    import wave as wav_module

    import numpy as np

    pcm = (np.clip(wave, -1.0, 1.0) * 32767).astype("<i2")
    with wav_module.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
