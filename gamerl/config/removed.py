"""Settings removed from the trainer on 2026-12-07, none set by a preset: a run directory or
config file that kept one off still loads (the name is dropped); one that had it on ran what this
trainer no longer can, and is refused in one line naming the git tag that still runs it."""

from __future__ import annotations

from typing import Any

REMOVED_TAG = "experiments-2026-12"  # the last commit that has them: rerun such a run from it
REMOVED_SECTIONS = ("rft",)  # a section that emptied: its settings are in REMOVED_SETTINGS
# each removed setting with its old default, the value that left it off
REMOVED_SETTINGS: dict[str, Any] = {
    "warmstart_kl_coef": 0.0, "warmstart_shown_mistakes": 0.0, "warmstart_rft_rounds": 0,
    "warmstart_rft_episodes": 128, "warmstart_rft_keep": 0.25, "warmstart_rft_steps": 16,
    "warmstart_rft_labels": "own", "warmstart_rft_with_demos": False,
    "policy_loss": "ppo_clip", "clip_range_high": None, "clip_ratio_c": None,
    "target_kl": None, "kl_loss_estimator": "k3", "loss_agg": "token-mean",
    # no preset changed these; each is now what its default was
    "share_prefix": True, "lora_dropout": 0.0, "weight_decay": 0.0, "adam_eps": 1e-8,
    "whiten_advantages": True, "save_every": 1, "kl_estimator": "k1",
}
# a removed setting that mattered only while another one was on
REMOVED_ONLY_WITH = {name: "warmstart_rft_rounds" for name in REMOVED_SETTINGS
                     if name.startswith("warmstart_rft_") and name != "warmstart_rft_rounds"}


def removed_in_use(settings: dict[str, Any]) -> list[str]:
    """The removed settings (``REMOVED_SETTINGS``) that ``settings`` (flat names, as a run's
    config.json has them) set to something other than off, where that changed the run."""
    def on(name: str) -> bool:
        return name in settings and settings[name] != REMOVED_SETTINGS[name]

    return [name for name in REMOVED_SETTINGS if on(name) and on(REMOVED_ONLY_WITH.get(name, name))]


def refuse_removed(settings: dict[str, Any], where: str) -> None:
    """ValueError, in one line, when ``settings`` turn on a removed setting (``removed_in_use``)."""
    used = removed_in_use(settings)
    if used:
        raise ValueError(f"{where} sets {', '.join(f'{n}={settings[n]!r}' for n in used)}, "
                         f"removed from the trainer on 2026-12-07: run it from the git tag "
                         f"{REMOVED_TAG}")
