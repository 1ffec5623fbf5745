"""Benchmark: the probe on every published full-size config (meta device, no weights), one fresh process each.

Prints figures; asserts nothing. Targets: meta build + plan under 3 s for every config, the whole
probe process under 1.5 GB peak RSS on a 2-core machine (GLM-4.5V, ~30k modules, is the hard one).

    python tests/benchmarks/bench_full_probe.py [NAME ...]     # names under tests/fixtures/full_configs

Columns: imports / config / meta build / plan are ``ModelFacts.timings`` (imports = torch +
transformers, config = AutoConfig + resolving the class, which imports its modeling module);
cpu is the CPU time of build + plan (less sensitive to a loaded machine than the wall figures);
wall is the whole child process including interpreter start; RSS is the child's peak
(``resource.getrusage``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FULL_CONFIGS = ROOT / "tests" / "fixtures" / "full_configs"

# Runs in the child: probe once, count modules through the table the probe itself builds. Run like
# ``python -m hooks.probe`` (``run_one_shot``: cyclic GC off, no teardown), so wall is what copier waits for.
CHILD = """
import json, resource, sys
from pathlib import Path
import hooks.model.facts as facts_mod
from hooks.probe import probe
from hooks import run_one_shot
counted = []
table_fn = facts_mod.module_table
def counting_table(model):
    table = table_fn(model)
    counted.append(len(table.modules))
    return table
facts_mod.module_table = counting_table
def main():
    facts = probe(Path(sys.argv[1]), with_processor=False)
    print(json.dumps({"timings": facts.timings, "modules": counted[0], "params": facts.num_parameters,
                      "problems": facts.plan.problems,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    return 0
run_one_shot(main)
"""


def run_child(model_dir: Path) -> dict:
    """Probe ``model_dir`` in a fresh interpreter; the last stdout line is the child's JSON."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CHILD, str(model_dir)], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    wall = time.monotonic() - start
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def row(name: str, res: dict) -> str:
    if "error" in res:
        return f"{name:34} ERROR {res['error']}"
    t = res["timings"]
    build_plan, cpu = t["meta_build_s"] + t["plan_s"], t.get("build_plan_cpu_s", float("nan"))
    return (f"{name:34} {t['imports_s']:7.2f} {t['config_s']:6.2f} {t['meta_build_s']:6.2f} {t['plan_s']:5.2f} "
            f"{build_plan:10.2f} {cpu:7.2f} {res['wall_s']:6.2f} {res['modules']:>8,} {res['params'] / 1e9:8.2f}B "
            f"{res['peak_rss_mb']:7.0f} {'ok' if not res['problems'] else 'PROBLEMS'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="config folders under tests/fixtures/full_configs (default: all)")
    args = parser.parse_args()
    names = args.names or sorted(p.name for p in FULL_CONFIGS.iterdir() if (p / "config.json").is_file())
    print(f"{'config':34} {'imports':>7} {'config':>6} {'build':>6} {'plan':>5} {'build+plan':>10} "
          f"{'cpu':>7} {'wall':>6} {'modules':>8} {'params':>9} {'RSS MB':>7} plan")
    for name in names:
        print(row(name, run_child(FULL_CONFIGS / name)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
