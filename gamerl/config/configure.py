"""``python -m gamerl configure``: a few questions, then config/train_config.json and
config/env_config.json (gamerl/config/jsonconfig.py, gamerl/config/envconfig.py) for
``python -m gamerl train --config``, for any game: the Password Game, Wordle or OpenSpiel.

    python -m gamerl.config.configure                    # interactive; defaults in [brackets]
    python -m gamerl.config.configure --defaults         # no questions: the committed defaults
    python -m gamerl.config.configure --task wordle --defaults --out my_run  # another game's
    python -m gamerl.config.configure --out my_run --defaults --force

The first question is the game (``--task`` answers it). Then the model, LoRA, the game's own
settings (each game's module declares its questions, ``Task.wizard``: Password Game: rules,
turns, reward mode; Wordle: guesses, hard mode; OpenSpiel: games, opponent, curriculum), failure
replay, how long, logging. Every answer is checked by
building the TrainConfig with it (a bad answer is explained and the question asked again);
existing files are only overwritten after a yes (``--force`` with ``--defaults``).

Defaults per game (``default_config(model, task)``): the ``tiny`` preset for that game (for
``password_game``, the committed config/*.json, and ``wordle`` exactly the preset the docs
measure; tests/test_jsonconfig.py checks the committed files never drift from them). OpenSpiel's
add LoRA (rank 8), the default curriculum, failure replay 0.3 and the easy stage's games.

For gamerl/cli.py: ``add_arguments(parser)`` adds ``--out``, ``--task``, ``--defaults`` and
``--force`` to a (sub)parser, and ``configure_main(args)`` takes that namespace or an argv list.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from .train_config import TrainConfig, get_config
from ..games.registry import get_task
from .envconfig import config_files, env_tasks
from .jsonconfig import ENV_FILE, TRAIN_FILE, config_to_json, dumps, write_run_config

Ask = Callable[[str], str]
Say = Callable[[str], Any]

DEFAULT_OUT = "config"
DEFAULT_TASK = "password_game"  # the committed config/*.json
MAX_ATTEMPTS = 20  # a scripted or broken input that keeps failing stops instead of looping
QWEN = "Qwen/Qwen3-0.6B"
YES, NO = ("y", "yes", "true", "1", "on"), ("n", "no", "false", "0", "off")

__all__ = ["Wizard", "add_arguments", "configure_main", "default_config", "game_choices", "main",
           "run_wizard"]


class WizardCancelled(SystemExit):
    """The user declined to overwrite and gave no other directory, or input ended."""


def game_choices() -> list[str]:
    """The games the wizard offers: every registered game with env_config.json keys
    (``Task.config_files``)."""
    return env_tasks()


def _game_question() -> str:
    """The first question: each game the wizard offers, with its ``WizardQuestions.label``
    ("Game: password_game (the Password Game), wordle, or openspiel (board and card games)")."""
    names = []
    for name in game_choices():
        wizard = get_task(name).wizard
        names.append(f"{name} ({wizard.label})" if wizard is not None and wizard.label else name)
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + ", or " + names[-1]
    return f"Game: {listed}"


def default_config(model: str = "tiny", task: str = DEFAULT_TASK) -> TrainConfig:
    """The wizard's defaults for ``task``: the preset for ``model`` (``tiny``; anything else:
    ``qwen3-0.6b`` with that model), then the game's own (``WizardQuestions.defaults`` in its
    module). The Password Game (the committed config/*.json for ``tiny``): the preset as it is.
    Wordle: the preset with its settings written out. OpenSpiel: LoRA (rank 8 for tiny, 16
    otherwise; alpha 2 x rank), the default curriculum, failure replay 0.3 of 1000, 8 new tokens
    per move and the easy stage's games against the random bot. A game without env_config.json
    keys is a ValueError."""
    try:
        config_files(task)
    except ValueError as e:
        raise ValueError(f"configure: task {task!r}: {e}") from None
    preset = "tiny" if model == "tiny" else "qwen3-0.6b"
    cfg = get_config(preset, task=task).replace(model=model)
    wizard = get_task(task).wizard
    return wizard.defaults(cfg, model) if wizard is not None else cfg


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # no torch or a broken CUDA setup: no GPU for us
        return False


def _yes_no(answer: str) -> bool:
    a = answer.strip().lower()
    if a in YES:
        return True
    if a in NO:
        return False
    raise ValueError("please answer yes or no")


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(answer: str) -> int:
        try:
            value = int(answer)
        except ValueError:
            raise ValueError(f"expected a whole number, got {answer!r}") from None
        if value < low:
            raise ValueError(f"expected a number >= {low}, got {value}")
        return value

    return parse


def _choice(options: Sequence[str]) -> Callable[[str], str]:
    def parse(answer: str) -> str:
        a = answer.strip().lower()
        if a not in options:
            raise ValueError(f"choose one of: {', '.join(options)}")
        return a

    return parse


def _parse_model(answer: str) -> str:
    a = answer.strip()
    if a.lower() in ("tiny", "qwen", "qwen3", "qwen3-0.6b", QWEN.lower()):
        return "tiny" if a.lower() == "tiny" else QWEN
    path = Path(a).expanduser()
    looks_local = a.startswith((".", "/", "~")) or a.count("/") != 1
    if looks_local and not path.is_dir():
        raise ValueError(f"{a!r}: not 'tiny', a hub id like {QWEN} or an existing model "
                         "directory")
    return str(path) if path.is_dir() else a


@dataclass(frozen=True)
class Wizard:
    """What a game's questions (``WizardQuestions.ask`` in its module) are handed:
    ``question(prompt, default, parse, *, validate=None, shown=None)`` asks (an empty answer
    takes the default; a bad one is explained and asked again), ``say(text)``, ``checked(cfg,
    **changes)`` (TrainConfig validates them), and the parsers ``yes_no``, ``int_at_least(low)``
    and ``choice(options)``."""

    question: Callable[..., Any]
    say: Say
    checked: Callable[..., TrainConfig]
    yes_no = staticmethod(_yes_no)
    int_at_least = staticmethod(_int_at_least)
    choice = staticmethod(_choice)


def _question_fn(ask: Ask, say: Say, accept_defaults: bool) -> Callable[..., Any]:
    """``question(prompt, default, parse, *, validate=None, shown=None)``: the answer (parsed,
    then checked by ``validate``, which may raise ValueError); on a bad answer it says why and
    asks again; with ``accept_defaults`` the default, unasked."""
    def question(prompt: str, default: Any, parse: Callable[[str], Any], *,
                 validate: Optional[Callable[[Any], Any]] = None, shown: Optional[str] = None):
        if accept_defaults:
            return default
        text = shown if shown is not None else (
            "yes" if default is True else "no" if default is False else
            ",".join(default) if isinstance(default, list) else str(default))
        for _ in range(MAX_ATTEMPTS):
            try:
                answer = ask(f"{prompt} [{text}]: ")
            except EOFError:
                raise WizardCancelled("configure: input ended; nothing written") from None
            answer = (answer or "").strip()
            try:
                value = default if not answer else parse(answer)
                if validate is not None:
                    validate(value)
                return value
            except ValueError as e:
                say(f"  {e}")
        raise ValueError(f"configure: no valid answer to {prompt!r} after {MAX_ATTEMPTS} tries")

    return question


def _checked(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    """``cfg`` with ``changes`` (TrainConfig validates them: ValueError re-asks)."""
    return cfg.replace(**changes)


def _ask_weights(cfg: TrainConfig, model: str, cuda: bool, question, say: Say) -> TrainConfig:
    """4-bit loading (with a GPU) and LoRA with its rank."""
    if not cuda:
        say("  no CUDA GPU found (torch.cuda.is_available() is False): 4-bit loading "
            "(QLoRA, bitsandbytes) needs one, so load_in_4bit stays off"
            + ("; the tiny model runs on the CPU anyway." if model == "tiny" else
               "; a real-size model on the CPU is only good for a smoke test."))
    else:
        has_bnb = importlib.util.find_spec("bitsandbytes") is not None
        if not has_bnb:
            say("  bitsandbytes is not installed (pip install '.[gpu]'): 4-bit loading needs it")
        four_bit = question("GPU found: load the model in 4 bits (QLoRA; saves GPU memory)?",
                            has_bnb and model != "tiny", _yes_no)
        if four_bit:
            cfg = _checked(cfg, lora=True, load_in_4bit=True)
            say("  4-bit weights cannot be trained directly: LoRA is on")
    if not cfg.load_in_4bit:
        cfg = _checked(cfg, lora=question("Train LoRA adapters (peft) instead of every weight?",
                                          cfg.lora, _yes_no))
    if cfg.lora:
        rank = question("LoRA rank", cfg.lora_rank, _int_at_least(1),
                        validate=lambda r: _checked(cfg, lora_rank=r))
        cfg = _checked(cfg, lora_rank=rank, lora_alpha=2 * rank)
    return cfg


def _ask_run(cfg: TrainConfig, question) -> TrainConfig:
    """Failure replay, how long, the logging and where the run goes."""
    replay = question("Failure replay: replay 30% of each epoch's games from recent "
                      "failures?", cfg.replay_fraction > 0, _yes_no)
    cfg = _checked(cfg, replay_fraction=0.3 if replay else 0.0)
    cfg = _checked(cfg, epochs=question("Epochs", cfg.epochs, _int_at_least(0),
                                        validate=lambda n: _checked(cfg, epochs=n)))
    cfg = _checked(cfg, episodes_per_epoch=question(
        "Episodes per epoch", cfg.episodes_per_epoch, _int_at_least(2),
        validate=lambda n: _checked(cfg, episodes_per_epoch=n)))
    cfg = _checked(cfg, wandb_mode=question(
        "Weights & Biases: offline, online or disabled (disabled: a local tensorboard log)",
        cfg.wandb_mode, _choice(("offline", "online", "disabled"))))
    run_dir = question("Run directory for checkpoints (auto: checkpoints/<preset>-<time>)", None,
                       lambda a: None if a.lower() in ("auto", "none", "null") else a,
                       shown="auto")
    return _checked(cfg, out_dir=run_dir)


def _where_to_write(cfg: TrainConfig, out: Path, overwrite: Optional[bool],
                    accept_defaults: bool, question) -> Path:
    """The directory to write to: ``out``, unless files there differ and the user (or
    ``overwrite``) says not to replace them; WizardCancelled when nowhere."""
    while True:
        train_path, env_path = out / TRAIN_FILE, out / ENV_FILE
        train, env = config_to_json(cfg)
        differ = [p for p, obj in ((train_path, train), (env_path, env))
                  if p.exists() and p.read_text() != dumps(obj)]
        if not differ or overwrite is True:
            return out
        names = " and ".join(str(p) for p in differ)
        exist = "exists" if len(differ) == 1 else "exist"
        if overwrite is False or (overwrite is None and accept_defaults):
            raise WizardCancelled(f"configure: {names} already {exist} with other content; not "
                                  "overwritten (--force to replace)")
        if question(f"{names} already {exist}. Overwrite?", False, _yes_no):
            return out
        other = question("Write to which directory instead? (empty: cancel)", "", str, shown="")
        if not other:
            raise WizardCancelled("configure: cancelled; nothing written")
        out = Path(other)


def run_wizard(ask: Ask = input, say: Say = print, out_dir: Union[str, Path] = DEFAULT_OUT,
               accept_defaults: bool = False, *, overwrite: Optional[bool] = None,
               cuda: Optional[bool] = None, task: Optional[str] = None) -> tuple[Path, Path]:
    """Ask, validate, write ``out_dir/train_config.json`` and ``out_dir/env_config.json``.

    ``ask(prompt) -> answer`` (``input``; an empty answer takes the default in brackets) and
    ``say(text)`` (``print``) make it scriptable. ``accept_defaults``: no questions at all.
    ``overwrite``: None asks before replacing existing files that differ (refuses with
    ``accept_defaults``); True / False decide without asking. ``cuda``: None detects it
    (``torch.cuda.is_available()``). ``task``: the game (None: asked, default password_game).
    Returns the two paths written.
    """
    cuda = _cuda_available() if cuda is None else cuda
    question = _question_fn(ask, say, accept_defaults)
    say("gamerl configure: PPO on a text game. Press Enter to take the [default].")
    # the game, then the model: together they pick the preset the rest starts from
    if task is None:
        task = question(_game_question(), DEFAULT_TASK, _choice(game_choices()))
    model = question("Model: tiny (embedded, CPU, minutes), Qwen/Qwen3-0.6B (GPU) or a model "
                     "directory", "tiny", _parse_model)
    cfg = default_config(model, task)
    if model != "tiny":
        warm = ("a warm start on the expert's games" if cfg.warmstart_demos == "expert"
                else "a warm start" if cfg.warmstart else "no warm start")
        say(f"  starting from the {cfg.preset} preset (lr {cfg.lr:g}, {warm}, "
            "gradient checkpointing)")
    cfg = _ask_weights(cfg, model, cuda, question, say)
    game = get_task(task).wizard  # the game's own settings (its module's WizardQuestions.ask)
    if game is not None and game.ask is not None:
        cfg = game.ask(cfg, Wizard(question, say, _checked))
    cfg = _ask_run(cfg, question)
    out = _where_to_write(cfg, Path(out_dir), overwrite, accept_defaults, question)
    train_path, env_path = write_run_config(cfg, out)
    say(f"wrote {train_path} and {env_path}")
    command = ["python", "-m", "gamerl", "train", "--task", task, "--config", str(train_path)]
    say("run it with:\n  " + " ".join(shlex.quote(c) for c in command))
    return train_path, env_path


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--out``, ``--task``, ``--defaults``, ``--force`` (for ``python -m gamerl configure``)."""
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"directory for {TRAIN_FILE} and {ENV_FILE} (default: config)")
    parser.add_argument("--task", choices=game_choices(),
                        help=f"the game (default: asked; with --defaults {DEFAULT_TASK}, the "
                             "committed files)")
    parser.add_argument("--defaults", action="store_true",
                        help="ask nothing: write the game's defaults (the Password Game's are "
                             "the committed config/*.json)")
    parser.add_argument("--force", action="store_true",
                        help="overwrite existing files without asking")
    return parser


def configure_main(args: Union[argparse.Namespace, Sequence[str], None] = None) -> int:
    """Run the wizard from parsed arguments (``add_arguments``) or an argv list; 0 on success,
    1 when cancelled (the reason is printed)."""
    if not isinstance(args, argparse.Namespace):
        parser = add_arguments(argparse.ArgumentParser(
            prog="python -m gamerl configure",
            description="Write config/train_config.json and config/env_config.json."))
        args = parser.parse_args(list(args) if args is not None else None)
    try:
        run_wizard(out_dir=args.out, accept_defaults=args.defaults,
                   overwrite=True if args.force else None,
                   task=getattr(args, "task", None) or (DEFAULT_TASK if args.defaults else None))
    except WizardCancelled as e:
        print(e.code)
        return 1
    except KeyboardInterrupt:
        print("\nconfigure: interrupted; nothing written")
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return configure_main(list(argv) if argv is not None else None)


if __name__ == "__main__":
    raise SystemExit(main())
