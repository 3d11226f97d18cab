#!/usr/bin/env bash
# Train Qwen3-0.6B on our games with verl 0.9 (python -m verl.trainer.main_ppo).
#
#   gamerl/integrations/verl/launch.sh grpo [hydra overrides...]   # GRPO, n=8, no critic
#   gamerl/integrations/verl/launch.sh ppo  [hydra overrides...]   # PPO, GAE with a critic
#
# Environment (defaults in brackets):
#   GAME            password_game | wordle | password_game,wordle   [password_game]
#   DATA_DIR        where train.parquet and val.parquet are          [data/$GAME]
#                   (exported first if missing: 10000 train, 256 val seeds per game)
#   MODEL           hub id or local path                             [Qwen/Qwen3-0.6B]
#   NNODES          nodes in the Ray cluster                         [1]
#   GPUS_PER_NODE   GPUs per node                                    [8]
#   RESPONSE_LENGTH tokens after the prompt, all turns               [8192; 3072 for wordle]
#   ROLLOUT         vllm | sglang                                    [vllm]
#   PYTHON          the interpreter with verl installed              [python3]
# Runs from the repository root (the agent-loop YAML path in the config is relative to it).
# Anything after the algorithm is passed to hydra, e.g. trainer.logger='[console,wandb]' or
# --cfg job (print the composed config and exit).
set -euo pipefail

ALGO=${1:-grpo}
shift || true
case "$ALGO" in
  grpo|ppo) ;;
  *) echo "usage: $0 grpo|ppo [hydra overrides...]" >&2; exit 2 ;;
esac

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$REPO"
PYTHON=${PYTHON:-python3}
GAME=${GAME:-password_game}
DATA_DIR=${DATA_DIR:-data/${GAME//,/_}}
MODEL=${MODEL:-Qwen/Qwen3-0.6B}
NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
ROLLOUT=${ROLLOUT:-vllm}
if [ -z "${RESPONSE_LENGTH:-}" ]; then
  if [ "$GAME" = wordle ]; then RESPONSE_LENGTH=3072; else RESPONSE_LENGTH=8192; fi
fi

if [ ! -f "$DATA_DIR/train.parquet" ] || [ ! -f "$DATA_DIR/val.parquet" ]; then
  "$PYTHON" -m gamerl.integrations.verl.dataset --game "$GAME" --train 10000 --val 256 \
    --out "$DATA_DIR"
fi

EXPERIMENT="qwen3-0.6b-${GAME//,/-}-$ALGO"
# verl resumes with torch.load(weights_only=False): refuse a checkpoint holding anything but
# tensors and plain values before it gets there (resume_guard.py says why).
"$PYTHON" -m gamerl.integrations.verl.resume_guard --project game_rl --experiment "$EXPERIMENT" "$@"

exec "$PYTHON" -m verl.trainer.main_ppo \
  --config-path="$REPO/gamerl/integrations/verl/config" \
  --config-name="game_rl_$ALGO" \
  data.train_files="$DATA_DIR/train.parquet" \
  data.val_files="$DATA_DIR/val.parquet" \
  data.max_response_length="$RESPONSE_LENGTH" \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.rollout.name="$ROLLOUT" \
  trainer.nnodes="$NNODES" \
  trainer.n_gpus_per_node="$GPUS_PER_NODE" \
  trainer.experiment_name="$EXPERIMENT" \
  "$@"
