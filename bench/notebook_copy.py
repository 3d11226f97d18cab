"""Execute the flagship notebook on this machine's default (no GPU: SmolLM2-135M-Instruct on the
first 6 rules) and keep the executed copy, outputs inline, as ``docs/notebook_cpu_run.ipynb``, so
a reader sees the figures and tables without running it. The committed notebook itself stays
without outputs.

    python bench/notebook_copy.py            # about 15 minutes on 2 CPU cores

The copy starts with a cell saying how, where and at which commit it was made.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "password_game_verl_training.ipynb"
COPY = ROOT / "docs" / "notebook_cpu_run.ipynb"
sys.path.insert(0, str(ROOT))


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def stamp(seconds: float, machine: str) -> str:
    """The copy's first cell: the command, the commit, the date, the machine, the time."""
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = " plus uncommitted changes" if _git("status", "--porcelain",
                                                "--untracked-files=no") else ""
    return (f"*An executed copy of `{NOTEBOOK.name}`, written by `python bench/notebook_copy.py`: "
            f"commit `{commit}`{dirty}; {datetime.now(timezone.utc):%Y-%m-%d}; {machine}, "
            f"{os.cpu_count()} cores, no GPU; {seconds / 60:.0f} minutes. Open the notebook "
            "itself to run it.*")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(COPY), help="where the executed copy goes")
    args = parser.parse_args(argv)
    try:
        import nbclient
        import nbformat
    except ImportError:
        print("needs nbclient and ipykernel: pip install nbclient ipykernel", file=sys.stderr)
        return 2
    from doc_numbers import machine_id  # bench/, beside this script

    nb = nbformat.read(NOTEBOOK, as_version=4)
    with tempfile.TemporaryDirectory(prefix="notebook_copy_") as tmp:
        # the notebook reads its budget from GAMERL_NB_*: only where its run goes is set here
        os.environ.update(GAMERL_NB_OUT=str(Path(tmp) / "run"), GAMERL_NB_WANDB="disabled")
        start = time.time()
        nbclient.NotebookClient(nb, timeout=3600, kernel_name="python3",
                                resources={"metadata": {"path": str(ROOT)}}).execute()
        seconds = time.time() - start
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(stamp(seconds, machine_id())))
    nbformat.write(nb, args.out)
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
