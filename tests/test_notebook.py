"""The flagship notebook, executed headless on the tiny preset with a small budget.

``password_game_verl_training.ipynb`` reads its budget from ``GAMERL_NB_*`` environment variables
(its CONFIG cell); the kernel inherits them. About a minute on 2 CPU cores (most of it the tiny
model's warm start).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "password_game_verl_training.ipynb"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie (exited, not yet reaped) is not running
    if stat.exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    return True


def _text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.append(out.get("data", {}).get("text/plain", ""))
        parts.append(out.get("data", {}).get("text/markdown", ""))
    return "".join(parts)


def test_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_notebook_runs_headless(tmp_path, monkeypatch):
    out = tmp_path / "run"
    for name, value in {"GAMERL_NB_PRESET": "tiny", "GAMERL_NB_FAST": "1",
                        "GAMERL_NB_EPOCHS": "2", "GAMERL_NB_EPISODES": "8",
                        "GAMERL_NB_EVAL": "8", "GAMERL_NB_WANDB": "offline",
                        "GAMERL_NB_OUT": str(out), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # raises CellExecutionError on the first failing cell

    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code_cells:
        assert cell.execution_count is not None, cell.source[:80]
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source[:80]
    text = "".join(_text(c) for c in code_cells)

    assert re.search(r"MODEL: \S+ \(preset 'tiny'\) because ", text)
    assert "<|im_start|>user" in text  # the first prompt was printed
    # the comparison table: baseline vs trained (plus solver and random), on 8 held-out games
    table = (out / "comparison.txt").read_text()
    for row in ("baseline", "trained", "solver (all rules)", "random strings (floor)"):
        assert re.search(rf"^{re.escape(row)}\s+-?\d", table, re.M), table
    assert table in text
    for fig in ("training_curves.png", "success_rate.png", "rule_pass_rates.png"):
        assert (out / fig).stat().st_size > 1000
    images = [o for c in code_cells for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # shown inline
    assert "| seed | policy | passwords" in text  # the sample-episode table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final"]["episodes"] == 8 and summary["baseline"]["episodes"] == 8
    assert len([r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
                if r.get("kind") == "epoch"]) == 2
    assert (out / "best").is_dir() and (out / "last").is_dir()

    # the server subprocess is gone
    pid = int(re.search(r"Password Game server pid (\d+)", text).group(1))
    assert int((out / "server.pid").read_text()) == pid
    assert not _alive(pid)
