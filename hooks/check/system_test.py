"""8. The model's system test (``tests/st/``): its files are there, which device its baseline came from, and whether
the baseline is stale (another framework revision, a changed run config). Warnings, never errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hooks import scaffold
from hooks.check.findings import Finding
from hooks.scaffold import StPaths
from hooks.smoke.baseline import Provenance, read_json, sha256


def system_test_findings(dest: Path, model_id: str, revision: Any) -> list[Finding]:
    """A missing or stale baseline (recorded on another framework revision, or for another run config), and
    which device each baseline came from. Warnings, never errors: the model is sound without one."""
    paths = StPaths(model_id)
    revision = str(revision or "")
    record = f"python -m hooks.smoke {scaffold.answers_file(model_id)} --record-baseline"
    missing = [str(p) for p in paths.triple() if not (dest / p).is_file()]
    if missing:
        return [Finding("warning", f"system test incomplete: {', '.join(missing)} missing",
                                f"record it in a MindSpeed-MM checkout: {record}")]
    data = read_json(dest / paths.provenance)
    if data is None:
        return [Finding("warning", f"{paths.baseline} has no {paths.provenance.name}: which device and "
                                "framework it came from is unknown", f"re-record it: {record}")]
    prov = Provenance.from_dict(data)
    found = [Finding("info", f"{paths.baseline} recorded on {prov.device} ({prov.device_name}, "
                             f"{prov.param_dtype}, torch {prov.torch}, transformers "
                             f"{prov.transformers}, framework {prov.framework_revision[:12]})",
                             "nothing to do" if prov.device == "npu" else
                             f"an NPU baseline for MindSpeed-MM's CI: {record} on the NPU host")]
    stale = []
    if revision and prov.framework_revision and prov.framework_revision != revision:
        stale.append(f"framework {prov.framework_revision[:12]}, checkout is {revision[:12]}")
    if sha256(dest / paths.run_config) != prov.run_config_sha256:
        stale.append(f"{paths.run_config} changed since")
    if stale:
        found.append(Finding("warning", f"{paths.baseline} is stale: recorded for {'; '.join(stale)}",
                                     f"check the losses with python -m hooks.update (or the smoke), then {record}"))
    return found
