"""The sample conversations data parity compares, and the media files they name.

One image; two images of different sizes; a system prompt and two turns; a video where the processor takes video;
one clip, two clips of different lengths and a clip with an image where it takes audio; text only. Each is built
twice, by MindSpeed-MM's data path (``write_samples``: its huggingface JSON and media files) and by the model's own
processor (``own_conversation``), so ``hooks.data.batch`` can compare what reaches ``forward``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# (name, system, turns); a turn's images are (width, height, rgb).
SAMPLES: list[tuple[str, str, list[tuple[str, str, list[tuple[int, int, tuple[int, int, int]]]]]]] = [
    ("one image", "", [("user", "What color is this?", [(64, 64, (200, 30, 30))]),
                       ("assistant", "The image is red.", [])]),
    ("two images", "", [("user", "Compare the two pictures.", [(64, 64, (200, 30, 30)), (96, 48, (30, 160, 40))]),
                        ("assistant", "The first is red, the second is green.", [])]),
    ("system and two turns", "Answer briefly.", [("user", "What color is the square?", [(64, 64, (30, 30, 200))]),
                                                 ("assistant", "Blue.", []),
                                                 ("user", "And the background?", []),
                                                 ("assistant", "Red.", [])]),
]


# For a model that takes audio: (name, system, turns), a turn's clips given as demo tones (hooks.data.sample.demo_audio
# index, seconds), its images as above. One clip, two clips of different pitch and length in one turn (the processor
# pads them to the longer), a clip with an image (omni).
AUDIO_SAMPLES: list[tuple[str, str, list[tuple[str, str, list[tuple[int, int, tuple[int, int, int]]],
                                               list[tuple[int, float]]]]]] = [
    ("one audio", "", [("user", "What do you hear?", [], [(0, 1.5)]), ("assistant", "A low tone.", [], [])]),
    ("two audios", "", [("user", "Compare the two sounds.", [], [(1, 1.5), (2, 2.5)]),
                        ("assistant", "The second is higher.", [], [])]),
]
OMNI_SAMPLE = ("audio and image", "", [("user", "Does the sound match the picture?", [(64, 64, (200, 30, 30))],
                                        [(3, 1.5)]), ("assistant", "A red picture and a very high tone.", [], [])])

VIDEO = ("video", "", [("user", "Describe the clip.", []), ("assistant", "A red square fades.", [])])
VIDEO_FRAMES, VIDEO_FPS = 8, 4


def write_video(path: Path) -> Path:
    """A two-second clip (8 frames of 64x64, fading from red) that MindSpeed-MM's data path reads with ``av``."""
    import av
    import numpy as np

    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=VIDEO_FPS)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for i in range(VIDEO_FRAMES):
            pixels = np.full((64, 64, 3), (220 - 20 * i, 30, 30), np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        container.mux(stream.encode())
    return path


def cases(media: list[str] | tuple[str, ...] = ("image",)) -> list[tuple[str, str, list[tuple[str, str, list[Any],
                                                                                                 list[int]]]]]:
    """The samples compared for a model that takes ``media``: the image samples (first, in their order), the audio
    samples, and one with both for a model that takes both; each turn (role, text, images, clips)."""
    found = [(name, system, [(role, text, pictures, []) for role, text, pictures in turns])
             for name, system, turns in SAMPLES] if "image" in media else []
    found += AUDIO_SAMPLES if "audio" in media else []
    return found + ([OMNI_SAMPLE] if {"image", "audio"} <= set(media) else [])


def write_samples(dest: Path, video: bool = False, media: list[str] | tuple[str, ...] = ("image",)) -> list[Path]:
    """One JSON file per sample in MindSpeed-MM's huggingface format (``<audio>`` then ``<image>`` first in a turn),
    images as PNG, clips as 16-bit WAV (``cases(media)``).

    One file each, so that a sample the model's processor cannot take (two differently sized images
    on Perception-LM) fails alone rather than the whole dataset build. With ``video``, a clip sample
    comes before the text-only one (last), and every record has a ``videos`` column (empty but the clip's): a YAML
    that maps it (data with videos, ``hooks.data.columns``) has MindSpeed-MM's converter read it from every record.
    """
    from PIL import Image

    from hooks.data.sample import demo_audio, write_wav

    records = []
    for index, (name, system, turns) in enumerate(cases(media)):
        messages, images, audios = ([{"role": "system", "content": system}] if system else []), [], []
        for role, text, pictures, clips in turns:
            for width, height, rgb in pictures:
                path = dest / f"s{index}_{len(images)}.png"
                Image.new("RGB", (width, height), rgb).save(path)
                images.append(path.name)
            for tone, seconds in clips:
                path = dest / f"a{index}_{len(audios)}.wav"
                write_wav(path, demo_audio(tone, seconds)[0])
                audios.append(path.name)
            messages.append({"role": role, "content": "<audio>" * len(clips) + "<image>" * len(pictures) + text})
        records.append({"messages": messages, "images": images, "name": name, **({"videos": []} if video else {}),
                        **({"audios": audios} if "audio" in media else {})})  # the YAML maps the columns
    if video:
        write_video(dest / "clip.mp4")
        records.append({"messages": [{"role": "user", "content": "<video>" + VIDEO[2][0][1]},
                                     {"role": "assistant", "content": VIDEO[2][1][1]}],
                        "images": [], "videos": ["clip.mp4"], "name": "video", **({"audios": []} if "audio" in media
                                                                                     else {})})
    records.append({"messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi."}],
                    "images": [], "name": "text only", **({"videos": []} if video else {}),
                    **({"audios": []} if "audio" in media else {})})
    paths = []
    for index, record in enumerate(records):
        paths.append(dest / f"sample{index}.json")
        paths[-1].write_text(json.dumps([record], indent=1), encoding="utf-8")
    return paths


def video_clip(config: dict[str, Any], clip: Path) -> Any:
    """The clip as the data path's own mm_plugin decodes and samples it (fps, length, size), with the
    rate of the sampled frames over the clip's two seconds.

    Frame sampling is the YAML's data-loading policy, not the model's format: both sides get these
    frames, and the comparison is about what the processor and template make of them (timestamps
    included: Qwen3-VL writes each frame's time).
    """
    from hooks.data.media import media_runtime
    from mindspeed_mm.fsdp.data.data_utils.func_utils.template import TEMPLATES

    pre = config["data"]["dataset_param"].get("preprocess_parameters") or {}
    plugin = TEMPLATES[config["data"]["dataset_param"]["basic_parameters"]["template"]].mm_plugin
    frames = plugin._regularize_videos([str(clip)], image_max_pixels=pre.get("video_max_pixels", 256 * 256),
                                       image_min_pixels=pre.get("video_min_pixels", 16 * 16),
                                       video_fps=pre.get("video_fps", 2.0), video_maxlen=pre.get("video_maxlen", 128),
                                       )["videos"][0]
    return media_runtime().Clip(frames, len(frames) / (VIDEO_FRAMES / VIDEO_FPS))


def own_conversation(index: int, media_root: Path, media: list[str] | tuple[str, ...] = ("image",),
                     rate: int = 16000) -> list[dict[str, Any]]:
    """Sample ``index`` of ``cases(media)`` as the model's own chat template takes it: media items inline (clips
    read with librosa at the extractor's ``rate``, as every loader of the framework and transformers does), then
    the text."""
    from PIL import Image

    name, system, turns = cases(media)[index]
    conversation = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
    count, heard = 0, 0
    for role, text, pictures, clips in turns:
        items = []
        for _ in clips:
            import librosa

            path = media_root / f"a{index}_{heard}.wav"
            items.append({"type": "audio", "audio": librosa.load(str(path), sr=rate)[0], "path": path})
            heard += 1
        for _ in pictures:
            items.append({"type": "image", "image": Image.open(media_root / f"s{index}_{count}.png").convert("RGB")})
            count += 1
        conversation.append({"role": role, "content": [*items, {"type": "text", "text": text}]})
    return conversation


