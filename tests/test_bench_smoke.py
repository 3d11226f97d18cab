"""Smoke test of the environment benchmark (``bench/env_bench.py --quick``): it runs end to end
against a real server subprocess and 64 concurrent clients see no errors. Timings are not
asserted (they depend on the machine's load); docs/benchmarks.md has the full run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_env_bench_quick(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "env_bench.py"), "--quick",
                           "--json", str(out)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "in-process: parse + 26 rules" in proc.stdout
    result = json.loads(out.read_text())
    assert result["in_process"]["us_per_password"] > 0
    assert len(result["in_process"]["rule_us"]) == 26
    assert [h["clients"] for h in result["http_submits"]] == [1, 8, 64]
    assert all(h["errors"] == 0 and h["submits"] > 0 for h in result["http_submits"])
    assert result["http_batch"]["checks_per_s"] > 0


@pytest.mark.slow
def test_prompt_prefix_bench_quick(tmp_path):
    """``bench/prompt_prefix_bench.py --quick`` (tiny, 8 games): the rollout with the shared
    prompt prefix and without play the same episodes, and the shared run prefills less."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "prompt_prefix_bench.py"),
                           "--quick", "--json", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    shared, plain, _ = result["rows"]
    assert result["same_episodes"] == result["games"] == 8
    assert shared["shared_prefix_tokens"] == shared["prompt_tokens"] - 1
    assert shared["prefilled_columns"] < plain["prefilled_columns"]
