"""docs/reference.md, written from the code so it cannot drift from it: every command's
``--help`` (from the argument parser) and every setting with its section, its default, each
preset's value where it differs, and the comment beside it in the source.

    python -m gamerl.config.reference            # print it
    python -m gamerl.config.reference --write    # rewrite docs/reference.md

tests/test_reference_doc.py fails when the committed page differs from what this writes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from dataclasses import MISSING
from pathlib import Path

from .presets import PRESET_SUMMARIES, PRESETS
from .cli_settings import setting_descriptions
from .train_config import SETTING_SECTION, setting_fields

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
COMMANDS = ("train", "evaluate", "merge", "configure", "build-tiny")


def command_help(command: str) -> str:
    """``python -m gamerl COMMAND --help`` as the parser prints it, at a fixed width."""
    from ..cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), _columns(100):
        try:
            main([command, "--help"])
        except SystemExit:
            pass
    return out.getvalue().rstrip() + "\n"


@contextlib.contextmanager
def _columns(width: int):
    import os

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def _cell(value) -> str:
    return "`" + json.dumps(value).replace("|", "\\|") + "`"


def settings_table() -> str:
    """One row per setting: section, name, default, the presets that change it, meaning."""
    defaults = {name: f.default_factory() if f.default is MISSING else f.default
                for name, f in setting_fields().items()}
    meaning = setting_descriptions()
    lines = ["| section | setting | default | presets that change it | what it is |",
             "|---|---|---|---|---|"]
    for name, section in SETTING_SECTION.items():
        changed = [f"{p}: {_cell(v[name])}" for p, v in sorted(PRESETS.items())
                   if name in v and v[name] != defaults[name]]
        lines.append(f"| {section} | `{name}` | {_cell(defaults[name])} | "
                     f"{'; '.join(changed)} | {meaning[name].replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def reference_markdown() -> str:
    parts = ["# Reference\n",
             "Written by `python -m gamerl.config.reference --write` from the command line's "
             "parser and `TrainConfig`; do not edit by hand.\n",
             "## Presets\n",
             "\n".join(f"- `{name}`: {PRESET_SUMMARIES[name]}" for name in sorted(PRESETS))
             + "\n",
             "## Commands\n"]
    for command in COMMANDS:
        parts.append(f"### `python -m gamerl {command}`\n\n```text\n{command_help(command)}```\n")
    parts += ["## Settings\n",
              "Any setting is given with `--set NAME=VALUE`, or in a `--config` file: "
              "`train_config.json` holds it under its section (`{\"optim\": {\"lr\": 0.0003}}`), "
              "except the game and its own settings (`task`, `task_config`, the `password_game` "
              "section), which `env_config.json` holds, and `progress` (`--no-progress`). "
              "`train --print-config` prints a run's values.\n",
              settings_table()]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"rewrite {DOC}")
    args = parser.parse_args(argv)
    text = reference_markdown()
    if args.write:
        DOC.write_text(text)
        print(f"wrote {DOC}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
