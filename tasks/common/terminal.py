"""Reading a player's answers in the terminal (the games' ``play`` commands)."""

from __future__ import annotations

from typing import Callable, Optional

__all__ = ["ask_nonempty"]


def ask_nonempty(prompt: str, read: Optional[Callable[[str], str]] = None) -> Optional[str]:
    """The next line the player typed, asking again after an empty one; None at end of input.

    Every game spends a turn on whatever it is sent, and an empty line is almost always Enter
    pressed by accident, not a move: so it is not sent. ``read`` defaults to ``input`` looked up
    at call time, so that a patched ``builtins.input`` (tests, embedding hosts) is the one used."""
    read = read if read is not None else input
    while True:
        try:
            line = read(prompt)
        except EOFError:
            return None
        if line:
            return line
