"""What a player sees in the games' command lines: rules numbered from 1, an empty line asks
again instead of spending a turn (tasks/common/terminal.py)."""

import re
import subprocess
import sys

from tasks.common.client import find_free_port
from tasks.common.terminal import ask_nonempty


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_ask_nonempty_skips_empty_lines_and_ends_at_eof():
    lines = iter(["", "", "Hello1!"])
    prompts = []

    def read(prompt):
        prompts.append(prompt)
        return next(lines)

    assert ask_nonempty("> ", read) == "Hello1!" and prompts == ["> "] * 3

    def eof(prompt):
        raise EOFError

    assert ask_nonempty("> ", eof) is None
    assert ask_nonempty("> ", lambda p: "   ") == "   "  # spaces are a password; only "" is not


def test_password_game_play_asks_again_after_an_empty_line():
    out = run("tasks.password_game", "play", "--seed", "3", stdin="\n\nhello\n:quit\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("password> ") == 4  # two empty lines, hello, :quit
    # hello was the first turn: the empty lines were not sent as passwords
    assert "Turn 1 of 30.\nYour last password: hello" in out.stdout
    assert "Turn 2 of 30" not in out.stdout and "Turn 3 of 30" not in out.stdout


def test_wordle_play_asks_again_after_an_empty_line():
    out = run("tasks.wordle", "play", "--seed", "3", stdin="\n\ncrane\n:quit\n")
    assert out.returncode == 0, out.stderr
    assert "Guesses left: 5 of 6" in out.stdout and "Guesses left: 4 of 6" not in out.stdout


def test_check_numbers_rules_from_1():
    out = run("tasks.password_game", "check", "--seed", "7", "--password", "Hello1!")
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if " rule " in l]
    assert [int(re.search(r"rule +(\d+):", l).group(1)) for l in lines] == list(range(1, 27))
    assert lines[0].endswith("Your password must be at least 5 characters.")


def test_demo_numbers_broken_rules_from_1():
    out = run("tasks.password_game", "demo", "--port", str(find_free_port()))
    assert out.returncode == 0, out.stdout + out.stderr
    broken = re.findall(r"broken rules \[([\d, ]*)\]", out.stdout)
    # hello breaks rule 2 (a number), Hello1! rule 5 (digits sum to 25), Hello1!996 rule 6
    # (a month), the solver's first password rule 20 (the fire it starts): as the game's text
    # numbers them, never 0-based.
    assert broken[:4] == ["2", "5", "6", "20"], out.stdout
    assert "WON" in out.stdout
