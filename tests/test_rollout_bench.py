"""Smoke test of ``bench/rollout_bench.py --quick``: it runs end to end on CPU and batched
rollouts use one generate call per turn. Speeds are not asserted (the machine is shared);
bench/results/rollout_bench_cpu.json has a full run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_rollout_bench_quick(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "rollout_bench.py"), "--quick",
                           "--no-cuda", "--json", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**__import__("os").environ,
                                                       "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "batched tok/s" in proc.stdout
    # the timed update starts from the weights that sampled (its warm-up pass is undone)
    assert "self-check" not in proc.stdout + proc.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["model"] == "tiny" and row["rollout_batched"]["generate_calls"] == 3  # 3 turns
    assert row["rollout_sequential"]["generate_calls"] == 3 * row["rollout_sequential"]["episodes"]
    assert row["update"]["tokens_per_s"] > 0 and row["update"]["optimizer_steps"] > 0
