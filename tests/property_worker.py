"""The framework's side of the property-based test (``tests/test_properties.py``): MindSpeed-MM's own dataset builder.

One long-lived process in the trainer's environment (``hooks.framework.environment.framework_env``: the framework
roots on ``PYTHONPATH``, the CPU bridges), so the framework's import cost is paid once for the whole run. Each
request is a YAML ``data.dataset_param`` section, rendered by the copy's own partial for the data the copy's
validators accepted; the answer is what ``mindspeed_mm.fsdp.data.build_mm_dataset`` made of it (the real
``load_dataset``, converter, ``mm_plugin`` placeholder check and processor), per row: its media, its length and
how many of its labels are trained, or the error the framework raised. Nothing here judges: the test does.

Protocol: a JSON request per line on stdin (``{"dataset_param": ..., "plugins": [...], "layouts": [[ranks,
micro_batch], ...], "out": PATH}``); the answer
is written to ``out`` and ``DONE_MARK`` printed on stdout (the framework may print there too).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

DONE_MARK = "msmm-property-worker: done"
IGNORE_INDEX = -100  # the framework's label for positions that are not trained (convert.py IGNORE_INDEX)


def _listed(value: Any) -> list[Any]:
    return [] if value is None else list(value) if isinstance(value, list | tuple) else [value]


_IMPORTED: set[str] = set()


def sampled(dataset: Any, ranks: int, micro_batch: int) -> dict[str, Any]:
    """What the YAML's sampler (``dataloader_param.sampler_type: BaseRandomBatchSampler``, built as
    ``prepare_sampler_dataloader`` builds it) gives each of ``ranks`` ranks in an epoch: its batch count, or the
    error."""
    from mindspeed_mm.fsdp.data.dataloader.sampler import BaseRandomBatchSampler

    found: dict[str, Any] = {"ranks": ranks, "micro_batch": micro_batch}
    try:
        found["batches"] = [len(list(BaseRandomBatchSampler(dataset, batch_size=micro_batch, num_replicas=ranks,
                                                            rank=rank, shuffle=True, drop_last=True)))
                            for rank in range(ranks)]
    except Exception as err:  # noqa: BLE001 - the sampler's error is the finding
        found["error"] = f"{type(err).__name__}: {err}"
    return found


def build(dataset_param: dict[str, Any], plugins: list[str], layouts: list[list[int]]) -> dict[str, Any]:
    """``build_mm_dataset`` on ``dataset_param`` after the YAML's data ``plugins`` are imported as the trainer
    imports them: each row's media, length and trained labels, or the error; and the sampler on each of
    ``layouts`` ((ranks, micro batch) pairs)."""
    from mindspeed_mm.fsdp.data import build_mm_dataset
    from mindspeed_mm.fsdp.utils.register import import_plugin

    try:
        import_plugin([p for p in plugins if p not in _IMPORTED])
        _IMPORTED.update(plugins)
        dataset = build_mm_dataset(dataset_param)
        rows = []
        for index in range(len(dataset)):
            row = dataset[index]
            labels = list(row["labels"])
            rows.append({"images": _listed(row.get("images")), "videos": _listed(row.get("videos")),
                         "audios": _listed(row.get("audios")), "tokens": len(row["input_ids"]),
                         "trained": sum(1 for label in labels if label != IGNORE_INDEX)})
        return {"rows": rows, "samplers": [sampled(dataset, *layout) for layout in layouts]}
    except Exception as err:  # noqa: BLE001 - the framework's error is the finding, reported to the test
        tail = traceback.format_exc().strip().splitlines()[-6:]
        return {"error": f"{type(err).__name__}: {' '.join(str(err).split())[:600]}", "trace": tail}


def main() -> int:
    sys.dont_write_bytecode = True
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        answer = build(request["dataset_param"], request.get("plugins", []), request.get("layouts", []))
        Path(request["out"]).write_text(json.dumps(answer), encoding="utf-8")
        print(DONE_MARK, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
