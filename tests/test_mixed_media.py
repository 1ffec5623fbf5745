"""Issue 40: data as users have it, with records of different media in one data set, trains with each medium proven
on a real item.

Tier 1: the YAML's ``attr`` maps ``images``, ``videos`` and ``audios`` each only where the data has that medium
(``hooks.data.columns``), byte for byte today's YAML without data; parity samples are drawn from the mapped media.
Tier 2 (one copy per case, several assertions each): a mixed omni data set (audio mostly, one image record, one
text-only) on the tiny Qwen2.5-Omni and a video data set (``<video>`` records with a ``videos`` column, one image
record, one text-only) on the tiny Qwen2.5-VL train through the real trainer, each medium proven at the step where
its first real item is trained (the omni image record is the 4th: rank 1 at step 2, after a step 1 whose batches
hold only the collator's masked stand-in image; the video set's image is the 3rd, at a step that trains no video,
the medium that shares its tower); ``--full-matrix`` adds audio-only data on the omni model and the other
omni families. The zero-initialised connector (tiny Gemma 3's projection, as ``from_config`` leaves it) is the
CI copy of ``tests/test_framework.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from hooks.data.batch_spec import BatchSpec
from hooks.data.columns import data_columns, data_has, for_data
from hooks.data.sample import demo_audio, write_wav
from tests.copier_run import copy, mm_checkout

AUDIO = {"messages": [{"role": "user", "content": "<audio>Which tone is this?"},
                      {"role": "assistant", "content": "A low tone."}], "audios": ["wav/0.wav"]}
IMAGE = {"messages": [{"role": "user", "content": "<image>What color is this?"},
                      {"role": "assistant", "content": "It is red."}], "images": ["img/red.png"]}
VIDEO = {"messages": [{"role": "user", "content": "<video>Describe the clip."},
                      {"role": "assistant", "content": "A red square fades."}], "videos": ["vid/clip.mp4"]}
TEXT = {"messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi."}]}


def _media(folder: Path, records: list[dict]) -> Path:
    """The records' media files (demo tones, a red PNG, the parity check's 2 s clip) and ``train.json``."""
    from PIL import Image

    from hooks.data.parity_samples import write_video

    for sub in ("wav", "img", "vid"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    named = {f for record in records for key in ("audios", "images", "videos") for f in record.get(key, [])}
    for i, name in enumerate(sorted(n for n in named if n.endswith(".wav"))):
        write_wav(folder / name, demo_audio(i, seconds=1.0)[0])
    if "img/red.png" in named:
        Image.new("RGB", (64, 64), (200, 30, 30)).save(folder / "img/red.png")
    if "vid/clip.mp4" in named:
        write_video(folder / "vid/clip.mp4")
    (folder / "train.json").write_text(json.dumps(records))
    return folder / "train.json"


def _audio(i: int) -> dict:
    return {**AUDIO, "audios": [f"wav/{i}.wav"]}


# Audio mostly; the image record 4th (rank 1 at step 2 on 2 ranks), a text-only record 6th.
OMNI_RECORDS = [_audio(0), _audio(1), _audio(2), IMAGE, _audio(3), TEXT, _audio(4), _audio(5)]
# Video mostly; the image record 3rd and the text-only 4th: step 2 trains them (rank 0, rank 1) and no video, so the
# vision tower's step-2 gradient is the image's alone (image and video share the tower).
VIDEO_RECORDS = [VIDEO, VIDEO, IMAGE, TEXT, VIDEO, VIDEO, VIDEO, VIDEO]


# --- tier 1: the columns ------------------------------------------------------------------------------------


def test_the_data_columns_are_those_some_record_names_files_in(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text(json.dumps([*OMNI_RECORDS, {**TEXT, "videos": []}]))
    assert data_columns(data) == {"audios", "images"}  # an empty list names nothing
    assert data_has(data, "images") and not data_has(data, "videos", True)
    assert data_columns("") is None and data_has("", "images") and not data_has("", "videos", False)
    assert data_columns(tmp_path / "missing.json") is None  # the data pre-flight names that one


def test_parity_samples_are_drawn_from_the_mapped_media(tmp_path: Path) -> None:
    spec = BatchSpec(media=["image", "audio"], video=True)
    audio_only, videos, text = tmp_path / "a.json", tmp_path / "v.json", tmp_path / "t.json"
    audio_only.write_text(json.dumps([_audio(0), TEXT]))
    videos.write_text(json.dumps(VIDEO_RECORDS))
    text.write_text(json.dumps([TEXT]))
    assert (for_data(spec, audio_only).media, for_data(spec, audio_only).video) == (["audio"], False)
    assert (for_data(spec, videos).media, for_data(spec, videos).video) == (["image"], True)
    assert (for_data(spec, text).media, for_data(spec, text).video) == ([], False)
    assert for_data(spec, "") == spec  # no data: every medium the processor takes, as before


@pytest.fixture(scope="module")
def omni_facts(tiny_models) -> dict:
    from hooks.probe import probe

    return json.loads(probe(tiny_models("qwen2_5_omni")).to_json(with_timings=False))


def _attr(facts: dict, data_json: str, branch: str = "b") -> str:
    from hooks.framework import checkout
    from hooks.render.files import render_template_file

    config = render_template_file("partials/config.yaml.jinja", {
        "model_id": "omni", "model_facts": facts, "data_branch": branch, "chat_template": "qwen2vl",
        "collator_id": "qwen3vl", "model_path": "/m", "trust_remote_code": False, "data_json": data_json,
        "media_root": "", "framework": checkout.facts("/nonexistent")})
    return config.split("    attr:\n")[1].split("      messages:")[0]


def test_the_yaml_maps_each_media_column_only_where_the_data_has_it(omni_facts: dict, tmp_path: Path) -> None:
    """Without data, today's lines; audio-only data maps no ``images`` (MindSpeed-MM's converter would raise
    ``KeyError: 'images'``); video data maps ``videos`` (else its ``<video>`` marks have no frames)."""
    assert _attr(omni_facts, "") == ('      images: images\n      # videos: videos  # for data with a "videos" column\n'
                                     '      audios: audios  # <audio> in the text, files in an "audios" column\n')
    audio_only, mixed, videos = tmp_path / "a.json", tmp_path / "m.json", tmp_path / "v.json"
    audio_only.write_text(json.dumps([_audio(0), _audio(1), TEXT]))
    mixed.write_text(json.dumps(OMNI_RECORDS))
    videos.write_text(json.dumps(VIDEO_RECORDS))
    assert _attr(omni_facts, str(audio_only)) == (
        '      # images: images  # for data with an "images" column (<image> in the text)\n'
        '      # videos: videos  # for data with a "videos" column\n'
        '      audios: audios  # <audio> in the text, files in an "audios" column\n')
    assert _attr(omni_facts, str(mixed)).splitlines()[0::2] == ["      images: images",
                                                                 "      audios: audios  # <audio> in the text, files "
                                                                 "in an \"audios\" column"]
    assert _attr(omni_facts, str(videos)) == (
        '      images: images\n      videos: videos  # <video> in the text, files in a "videos" column\n'
        '      # audios: audios  # for data with an "audios" column (<audio> in the text)\n')


# --- tier 2: copies that train ------------------------------------------------------------------------------


def _proven(stdout: str, medium: str) -> re.Match | None:
    """The media proof's verified line for ``medium``: its record and step."""
    return re.search(rf"verified: {medium} reached forward \(\w+ \[[^]]*\] on rank (\d)[^;]*; a real one: record "
                     rf"(\d+)\) and (.+?) got a gradient \(norm ([^)]+)\) at step (\d)", stdout)


def _copy(tmp_path: Path, tiny_models, mm_home: Path, template_src: Path, arch: str, records: list[dict]):
    checkout = mm_checkout(mm_home, tmp_path / "mm")
    model_id = f"{arch}_mixed"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch),
                data_json=_media(tmp_path / "mydata", records), devices_per_node=2)
    print(done.stdout[-5000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    config = yaml.safe_load((checkout / "examples" / model_id / f"{model_id}_config.yaml").read_text())
    return done.stdout, config


OMNI_FAMILIES = ["qwen2_5_omni", pytest.param("phi4_multimodal", marks=pytest.mark.full_matrix),
                 pytest.param("gemma3n", marks=pytest.mark.full_matrix),
                 pytest.param("qwen3_omni_moe", marks=pytest.mark.full_matrix)]


@pytest.mark.tier2
@pytest.mark.parametrize("arch", OMNI_FAMILIES)
def test_mixed_omni_data_trains_with_each_medium_proven_on_a_real_item(arch: str, tmp_path: Path, tiny_models,
                                                                      mm_home: Path, template_src: Path) -> None:
    """Audio in 6 records, an image in the 4th, a text-only 6th: step 1 holds audio on both ranks and only the
    collator's masked stand-in image; the image is proven at step 2 on rank 1, where its real item is trained."""
    stdout, config = _copy(tmp_path, tiny_models, mm_home, template_src, arch, OMNI_RECORDS)
    attr = config["data"]["dataset_param"].get("attr")
    if attr is not None:  # the huggingface data path (branches a, b): the columns the data has, no videos
        assert attr.get("images") == "images" and attr.get("audios") == "audios" and "videos" not in attr
    assert "data parity: MATCH" in stdout
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", stdout), stdout[-3000:]
    image, audio = _proven(stdout, "image"), _proven(stdout, "audio")
    assert image and image.group(2) == "4" and image.group(1) == "1" and image.group(5) == "2", stdout[-3000:]
    assert audio and audio.group(2) == "1" and audio.group(5) == "1", stdout[-3000:]
    assert "not verified: image" not in stdout and "not verified: audio" not in stdout  # no stand-in caveat left
    assert "verified: loss equivalence: step-1 loss" in stdout


@pytest.mark.tier2
def test_video_data_with_an_image_record_trains_on_a_video_model(tmp_path: Path, tiny_models, mm_home: Path,
                                                                 template_src: Path) -> None:
    """``<video>`` records with a ``videos`` column on the tiny Qwen2.5-VL: the YAML maps ``videos``, parity
    compares a video sample (MATCH), and video (step 1) and image (step 2, rank 0) are each proven on a real item."""
    stdout, config = _copy(tmp_path, tiny_models, mm_home, template_src, "qwen2_5_vl", VIDEO_RECORDS)
    attr = config["data"]["dataset_param"]["attr"]
    assert attr.get("videos") == "videos" and attr.get("images") == "images" and "audios" not in attr
    assert "data parity: MATCH" in stdout and re.search(r"compared: [^\n]*video", stdout), stdout[-3000:]
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", stdout), stdout[-3000:]
    image, video = _proven(stdout, "image"), _proven(stdout, "video")
    assert video and video.group(2) == "1" and video.group(5) == "1", stdout[-3000:]
    assert image and image.group(2) == "3" and image.group(1) == "0" and image.group(5) == "2", stdout[-3000:]
    assert "not verified: image" not in stdout and "not verified: video" not in stdout
    assert "verified: loss equivalence: step-1 loss" in stdout


@pytest.mark.tier2
@pytest.mark.full_matrix
def test_audio_only_data_trains_on_an_omni_model(tmp_path: Path, tiny_models, mm_home: Path,
                                                 template_src: Path) -> None:
    """No image in the data: the YAML maps no ``images`` column (``KeyError: 'images'`` in the converter before),
    parity compares the audio samples only, and audio is proven at step 1."""
    stdout, config = _copy(tmp_path, tiny_models, mm_home, template_src, "qwen2_5_omni",
                           [_audio(i) for i in range(6)])
    attr = config["data"]["dataset_param"]["attr"]
    assert "images" not in attr and attr.get("audios") == "audios"
    assert "data parity: MATCH" in stdout and not re.search(r"compared: [^\n]*one image", stdout)
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", stdout), stdout[-3000:]
    audio = _proven(stdout, "audio")
    assert audio and audio.group(5) == "1" and "verified: image" not in stdout
