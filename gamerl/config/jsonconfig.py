"""A run as two JSON files: ``train_config.json`` (the trainer's settings) and ``env_config.json``
(the game and its settings: gamerl/config/envconfig.py).

    python -m gamerl configure                        # the wizard writes config/*.json
    python -m gamerl train --config config/train_config.json        # + config/env_config.json

    cfg, env_url = load_run_config("config/train_config.json")      # + config/env_config.json
    train, env = config_to_json(cfg, env_url)                          # the inverse
    write_run_config(cfg, "config", env_url)                           # -> (train path, env path)

train_config.json uses TrainConfig's own names (gamerl/config/train_config.py; docs/reference.md
lists every setting with its section): a top-level ``"preset"``, then one object per TrainConfig
section holding its settings under their own names (``FILE_SECTIONS``)::

    {"preset": "tiny", "optim": {"lr": 0.0003, "minibatch_size": 4},
     "instances": {"curriculum": "default", "replay_fraction": 0.3}}

Every setting is there but env_config.json's (``task``, ``task_config``, the ``password_game``
section) and ``progress`` (how a process shows a run, not what it is): ``NOT_IN_TRAIN_FILE``. A
key left out keeps the base's value (the file's ``preset``, default ``tiny``, for env_config.json's
task; or the ``base`` argument). An unknown section or key, or a value of the wrong type, is an
error naming the file, the section and the key, with the known keys. ``instances.curriculum`` is
null (off), ``"default"`` (the game's stages) or a list of stage objects ``{"name", "games",
"opponent", "threshold"}``, checked against the game's names. JSON has no comments: every object
may hold a ``"_comment"`` (a string or a list of strings), which is ignored.

A file in the old shape (sections ``model``, ``lora``, ``generation``, ``training``,
``curriculum``, ``replay``, ``logging``; keys ``model_name``, ``learning_rate``, ...) still loads,
with a one-line notice, through ``LEGACY``. A key of a setting removed on 2026-12-07
(``removed.REMOVED_SETTINGS``) is dropped where it holds the value that left it off, and refused in
one line, naming the git tag that still runs it, where it does not.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterator, Optional

from .presets import PRESETS
from .removed import REMOVED_SETTINGS, refuse_removed
from .train_config import PRESENTATION_FIELDS, SECTIONS, GameSettings, TrainConfig, get_config
from .envconfig import ENV_FILE, LEGACY_TASK, config_files, env_to_json, read_env
from .jsonchecks import COMMENT, PathLike, check_keys, field_value, read_json, without_comment

log = logging.getLogger("gamerl")
TRAIN_FILE = "train_config.json"
TOP_LEVEL = ("preset",)  # the base of the keys left out, so ahead of the sections
# TrainConfig settings that train_config.json does not hold: env_config.json's, and how a process
# shows a run (PRESENTATION_FIELDS: its command line's)
NOT_IN_TRAIN_FILE = ("task", "task_config", *(f.name for f in fields(SECTIONS["password_game"])),
                     *PRESENTATION_FIELDS)
# the file's sections -> their keys: TrainConfig's, in its order
FILE_SECTIONS: dict[str, tuple[str, ...]] = {
    section: keys for section, cls in SECTIONS.items()
    if (keys := tuple(f.name for f in fields(cls)
                      if f.name not in NOT_IN_TRAIN_FILE and f.name not in TOP_LEVEL))}
# a shape: section -> {key: setting}, "" the top level
NEW: dict[str, dict[str, str]] = {"": {k: k for k in TOP_LEVEL},
                                  **{s: {k: k for k in keys} for s, keys in FILE_SECTIONS.items()}}
# The old shape, read only: its sections and keys, "key=setting" where the names differ.
# curriculum.enabled/stages and replay.enabled/fraction are one setting each (_legacy_switch).
_LEGACY_KEYS = {
    "": "preset output_dir=out_dir",
    "model": "model_name=model use_4bit=load_in_4bit device dtype attn_implementation "
             "gradient_checkpointing trainable_layers",
    "lora": "enabled=lora r=lora_rank lora_alpha target_modules=lora_target_modules",
    "ppo": "learning_rate=lr value_head_lr ppo_epochs batch_size=minibatch_size "
           "micro_batch_size clip_range value_clip_range vf_coef entropy_coef max_grad_norm "
           "gamma lam discount_per kl_coef kl_in_reward advantage_estimator group_size "
           "reward_scale score_batch_size",
    "generation": "max_new_tokens temperature top_p top_k eval_temperature eval_top_p eval_top_k "
                  "eval_greedy max_context_tokens feedback system_prompt cuda_graphs",
    "training": "epochs episodes_per_epoch max_steps seed train_seed_start train_seed_count "
                "eval_seed_start eval_episodes val_seed_start val_episodes eval_batch_size "
                "eval_every warmstart warmstart_examples warmstart_steps "
                "warmstart_batch_size warmstart_lr warmstart_checkpoint_seconds "
                "warmstart_all_layers",
    "curriculum": "enabled=curriculum stages=curriculum window=curriculum_window",
    "replay": "enabled=replay_fraction fraction=replay_fraction capacity=replay_capacity",
    "logging": "wandb_mode wandb_project progress",
}
LEGACY: dict[str, dict[str, str]] = {section: dict((k.split("=") * 2)[:2] for k in keys.split())
                                     for section, keys in _LEGACY_KEYS.items()}

# What each section's "_comment" adds to its dataclass's first sentence (every game);
# train_comments(task) adds the game's own (its module's ConfigFiles.train_comments).
_COMMON_COMMENTS: dict[str, list[str]] = {
    "network": ["model: \"tiny\" (the embedded model: CPU, minutes), a hub id or a directory; "
                "device, dtype, attn_implementation null: chosen automatically.",
                "On a GPU with Qwen3-0.6B: \"preset\": \"qwen3-0.6b\", model \"Qwen/Qwen3-0.6B\", "
                "gradient_checkpointing true, sft.warmstart false, adapters.lora true with "
                "lora_rank 16, lora_alpha 32 and load_in_4bit true (QLoRA: needs CUDA and "
                "bitsandbytes); or run `python -m gamerl configure`."],
    "adapters": ["Only the adapters and the value head train; the reference policy is the base "
                 "model with the adapters off. lora_target_modules null: every attention and MLP "
                 "projection."],
    "instances": ["curriculum: null (off), \"default\" (the game's stages) or a list of "
                  "{\"name\", \"games\", \"opponent\", \"threshold\"}; a stage ends when the "
                  "success rate over the last curriculum_window episodes reaches its threshold.",
                  "Failure replay: replay_fraction of each epoch's games are replayed from the "
                  "replay_capacity most recent failures (0: off)."],
    "optim": ["lr: the model's; value_head_lr: the value head's; minibatch_size: episodes per "
              "optimizer step."],
    "output": ["out_dir null: checkpoints/<preset>-<time>. wandb_mode offline | online | "
               "disabled (disabled: a local tensorboard + JSONL log instead)."],
}


def _first_sentence(doc: Optional[str]) -> str:
    return " ".join((doc or "").split()).split(". ")[0].rstrip(".") + "."


def train_comments(task: str) -> dict[str, Any]:
    """The "_comment" of each section of train_config.json (key "" for the top level): the
    first sentence of its dataclass's docstring, then the common lines and the game's own
    (``Task.config_files``)."""
    files = config_files(task)
    top = ["gamerl run configuration: each section is one of TrainConfig's, each key one of its "
           "settings (gamerl/config/train_config.py documents them, docs/reference.md lists "
           "them). Written by `python -m gamerl configure`.",
           f"Run: python -m gamerl train --task {task} --config config/train_config.json "
           f"(env_config.json next to it holds {files.env_holds}).",
           "Keys left out keep the preset's values; unknown keys are errors."]
    game = {k: [v] if isinstance(v, str) else list(v) for k, v in files.train_comments.items()}
    out: dict[str, Any] = {"": top}
    for s in FILE_SECTIONS:
        lines = [_first_sentence(SECTIONS[s].__doc__), *_COMMON_COMMENTS.get(s, ()),
                 *game.get(s, ())]
        out[s] = lines[0] if len(lines) == 1 else lines
    return out


__all__ = ["ENV_FILE", "FILE_SECTIONS", "LEGACY", "NOT_IN_TRAIN_FILE", "TRAIN_FILE",
           "config_to_json", "dumps", "load_run_config", "read_json", "train_comments",
           "write_run_config"]


# ----------------------------------------------------------------------------- reading

def old_names(data: dict) -> list[str]:
    """The old shape's section names and renamed keys that a train_config.json object uses
    (none: it is in TrainConfig's names)."""
    old = [k for k in data if (k in LEGACY or k in LEGACY[""]) and k not in (*NEW, *NEW[""])]
    renamed = {k: None for s in data if s in LEGACY and isinstance(data[s], dict)
               for k in data[s] if LEGACY[s].get(k, k) != k}
    return [*renamed, *old] if old else []


def _items(data: dict, path: Path, shape: dict[str, dict[str, str]],
           ) -> Iterator[tuple[str, str, Any]]:
    """``(where, setting, value)`` for each key of a train_config.json object in ``shape``
    (``NEW`` or ``LEGACY``), its sections and keys checked, removed settings dropped where off
    and refused where on."""
    sections = [s for s in shape if s]
    check_keys(data, [*shape[""], *sections], str(path))
    yield from ((key, setting, data[key]) for key, setting in shape[""].items() if key in data)
    for section in (s for s in sections if s in data):
        where, obj = f"{path}: {section}", data[section]
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected an object, got {json.dumps(obj)}")
        refuse_removed(obj, where)
        obj = {k: v for k, v in obj.items() if k not in REMOVED_SETTINGS}
        check_keys(obj, list(shape[section]), where)
        obj = without_comment(obj)
        if shape is LEGACY and section in ("curriculum", "replay"):
            obj = _legacy_switch(obj, section, where)
        yield from ((f"{section}.{key}", shape[section][key], v) for key, v in obj.items())


def _legacy_switch(obj: dict, section: str, where: str) -> dict:
    """The old curriculum's ``enabled`` + ``stages`` (null: "default") and replay's ``enabled``
    + ``fraction`` as the one setting each pair is: ``stages`` / ``fraction`` (null / 0 when
    enabled is false)."""
    key, default, off = {"curriculum": ("stages", "default", None),
                         "replay": ("fraction", 0.3, 0.0)}[section]
    on = obj.pop("enabled", None)
    if on is None and obj.get(key) is None:  # says nothing: the base's
        return {k: v for k, v in obj.items() if k != key}
    if not isinstance(on, (bool, type(None))):
        raise ValueError(f"{where}.enabled: expected true or false, got {json.dumps(on)}")
    return {**obj, key: off if on is False else default if obj.get(key) is None else obj[key]}


def _check_curriculum(value: Any, where: str, task: str) -> None:
    """A curriculum's stages against what the game's may name, whatever the run: a bound of the
    run's (a Password stage past num_rules, which env_config.json may set) is TrainConfig's to
    check, once both files are read."""
    from ..games.registry import get_task
    from .curriculum_stages import parse_stages

    choices = get_task(task).curriculum
    if value is None or choices is None:  # a game without one: TrainConfig says so, naming it
        return
    try:
        parse_stages(value, choices=choices)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: {e}") from None


def load_run_config(train_path: PathLike, env_path: Optional[PathLike] = None, *,
                    base: Optional[TrainConfig] = None,
                    overrides: Optional[dict[str, Any]] = None,
                    ) -> tuple[TrainConfig, Optional[str]]:
    """``(TrainConfig, env_url)`` from train_config.json and env_config.json.

    ``env_path`` defaults to ``env_config.json`` next to ``train_path`` if there is one (no env
    file: the base's task and task_config stay). ``base`` supplies every key the files leave
    out; default: ``get_config(<the file's "preset" or "tiny">, task=<env_config.json's task>)``
    (no env file: the Password Game; openspiel for a file in the old shape). A ``base`` made for
    another task than the env file's is replaced by its preset for that task (``--preset tiny``
    means the tiny preset of the configured game). ``overrides`` (TrainConfig names, e.g. from
    ``--set``) are applied last. ``env_url`` is the server URL when env_config.json says
    ``"execution": "http"``, else None.
    """
    train_path = Path(train_path)
    train = read_json(train_path)
    if env_path is None:
        candidate = train_path.parent / ENV_FILE
        env_path = candidate if candidate.exists() else None
    preset = train.get("preset")
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"{train_path}: preset: expected one of {', '.join(PRESETS)} or null, "
                         f"got {json.dumps(preset)}")
    env, sources = None, str(train_path)
    if env_path is not None:
        env_path = Path(env_path)
        env = read_env(read_json(env_path), env_path)
        sources += f" + {env_path}"
    old = old_names(train)
    if old:
        log.warning("%s uses the old key names (%s); rewrite it in TrainConfig's sections and "
                    "names (docs/reference.md) or with python -m gamerl configure", train_path,
                    ", ".join(old[:6]) + (", ..." if len(old) > 6 else ""))
    task = env.task if env else base.task if base else LEGACY_TASK if old else GameSettings.task
    if base is None or base.task != task:
        base = get_config((base.preset if base is not None else None) or preset or "tiny",
                          task=task)
    values: dict[str, Any] = {}
    for where, setting, value in _items(train, train_path, LEGACY if old else NEW):
        values[setting] = field_value(value, setting, f"{train_path}: {where}")
        if setting == "curriculum":
            _check_curriculum(values[setting], f"{train_path}: {where}", task)
    env_url = None
    if env is not None:
        values.update(env.values)
        env_url = env.url
    try:
        cfg = base.replace(**values)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{sources}: {e}") from None
    from ..games.registry import get_task

    files = get_task(cfg.task).config_files
    if files is not None and files.check is not None:  # the game's check of the whole
        try:
            files.check(cfg)
        except ValueError as e:
            raise ValueError(f"{sources}: {e}") from None
    return (cfg.replace(**overrides) if overrides else cfg), env_url


# ----------------------------------------------------------------------------- writing

def _curriculum(cfg: TrainConfig) -> dict[str, Any]:
    """``curriculum`` (null, "default" or stage dicts) and ``curriculum_window`` as written."""
    spec, window = cfg.curriculum, cfg.curriculum_window
    if isinstance(spec, dict):  # Curriculum.to_dict()'s {"stages", "window"} form
        spec, window = spec.get("stages", "default"), spec.get("window", window)
    if isinstance(spec, (list, tuple)):
        spec = [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in spec]
    return {"curriculum": spec or None, "curriculum_window": window}


def config_to_json(cfg: TrainConfig, env_url: Optional[str] = None) -> tuple[dict, dict]:
    """``(train_config.json object, env_config.json object)`` for ``cfg``: the inverse of
    ``load_run_config`` (every setting of ``FILE_SECTIONS``, with "_comment"s). ``env_url``
    set: the env file says ``"execution": "http"`` with that ``base_url``."""
    comments = train_comments(cfg.task)
    values = {**cfg.settings(), **_curriculum(cfg)}
    train: dict[str, Any] = {COMMENT: comments[""], "preset": cfg.preset}
    for section, keys in FILE_SECTIONS.items():  # tuples as lists
        train[section] = {COMMENT: comments[section],
                          **{k: json.loads(json.dumps(values[k])) for k in keys}}
    return train, env_to_json(cfg, env_url)


def dumps(obj: dict) -> str:
    """The files' text: 2-space indent, keys in schema order, a final newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)  # not mkstemp's 600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run_config(cfg: TrainConfig, out_dir: PathLike, env_url: Optional[str] = None,
                     ) -> tuple[Path, Path]:
    """Write ``out_dir/train_config.json`` and ``out_dir/env_config.json`` (atomically; the
    directory is created); return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, env = config_to_json(cfg, env_url)
    train_path, env_path = out / TRAIN_FILE, out / ENV_FILE
    _write_atomic(train_path, dumps(train))
    _write_atomic(env_path, dumps(env))
    return train_path, env_path
