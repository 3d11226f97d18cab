"""game-RL's trainer: ``python -m gamerl`` (gamerl/cli.py), the notebook, the verl bridge."""

import os as _os

# Same machine, same seed, same thread count: the same numbers to the last digit. torch's BLAS
# on x86 is MKL, which picks its kernels at run time; without its Conditional Numerical
# Reproducibility mode the same product can differ in the last bits from one run to the next
# (memory alignment, the code path chosen), and a PPO run amplifies that until games part (two
# runs of the tiny preset, reported in issue 23: update/loss 0.0063926526 vs 0.0063926552 at
# epoch 1, different games from epoch 14). MKL_CBWR fixes the code path; MKL reads it at its
# first call, so setting it here, before any model runs, is enough. A user's own value wins.
_os.environ.setdefault("MKL_CBWR", "AUTO")
