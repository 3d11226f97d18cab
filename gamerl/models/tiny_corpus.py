"""Text for training the `tiny` model's byte-level BPE tokenizer.

The tokenizer is byte-level, so it can encode *any* string; the corpus only decides which byte
sequences get merged into single tokens (i.e. how short game prompts and passwords are). So it
should look like what the policy will read and write: rule sentences, rendered game turns,
passwords full of emoji and **bold**/*italic* markup, and Qwen-style chat markup.

Two sources, concatenated:
* the games themselves (``game_texts``): ``tasks.password_game.corpus_texts()`` if the game
  exposes it, else whatever rule texts and rendered turns its public API gives. Everything there
  is optional and guarded: the game package is developed separately and may be partly missing.
* a built-in, seeded generator of password-game-like text (``builtin_texts``), so the build works
  (and gives the same tokenizer) with no game installed at all.

Everything is deterministic: fixed seeds, no clocks, no set iteration order.
"""

from __future__ import annotations

import random
from typing import Callable

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
SPONSORS = ("pepsi", "starbucks", "shell")
AFFIRMATIONS = ("I am loved", "I am worthy", "I am enough")
MOONS = ("🌑", "🌒", "🌓", "🌔", "🌕", "🌖", "🌗", "🌘")
EGG, CHICKEN, WORM, FIRE, LIFTER = "🥚", "🐔", "🐛", "🔥", "🏋️‍♂️"
ELEMENTS = ("He", "Li", "Be", "Ne", "Na", "Mg", "Al", "Si", "Cl", "Ar", "Ca", "Fe", "Co", "Ni",
            "Cu", "Zn", "Ag", "Au", "Sn", "Pb", "Hg", "Kr", "Xe", "Rn", "Ra", "U", "Pu", "Am",
            "Es", "Fm", "No", "Lr", "Ti", "Mn", "Ga", "Ge", "As", "Se", "Br")
ROMANS = ("I", "V", "X", "L", "C", "D", "M", "VII", "XXXV", "XXV", "VX", "XIV", "MMXXIV")
LEAP_YEARS = ("1996", "2000", "2004", "2016", "2020", "2024", "2028")
CHESS_MOVES = ("Qh7#", "Qxf7#", "Rd8#", "Nf3", "e4", "O-O", "Bxf7+", "Qg7#", "Ra8#", "Nxe5")
COUNTRIES = ("france", "japan", "brazil", "kenya", "canada", "peru", "norway", "egypt", "india",
             "mexico", "chile", "italy")
WORDS = ("crane", "slate", "pious", "tiger", "brick", "flame", "ghost", "quart", "zesty", "vivid")

RULE_SENTENCES = (
    "Your password must be at least 5 characters.",
    "Your password must include a number.",
    "Your password must include an uppercase letter.",
    "Your password must include a special character.",
    "The digits in your password must add up to 25.",
    "Your password must include a month of the year.",
    "Your password must include a Roman numeral.",
    "Your password must include one of our sponsors: pepsi, starbucks, shell.",
    "The Roman numerals in your password should multiply to 35.",
    "Your password must include this CAPTCHA: {captcha}",
    "Your password must include today's Wordle answer: \"{word}\".",
    "Your password must include a two letter symbol from the periodic table.",
    "Your password must include the current phase of the moon as an emoji: {moon}",
    "Your password must include the name of this country: {country}.",
    "Your password must include a leap year.",
    "Your password must include the best move in algebraic chess notation. White to move.",
    "🥚 This is my chicken Paul. He hasn't hatched yet, please put him in your password.",
    "The elements in your password must have atomic numbers that add up to 200.",
    "All the vowels in your password must be bolded (write **a** for a bold a).",
    "Oh no! Your password is on fire 🔥. Quick, put it out!",
    "Your password is not strong enough 🏋️‍♂️ (it must contain 🏋️‍♂️ at least 3 times).",
    "Your password must contain one of the following affirmations: I am loved, I am worthy, "
    "I am enough.",
    "Paul has hatched 🐔! Please don't forget to feed him. He eats three 🐛 every turn.",
    "Your password must include the URL of a {minutes} minute {seconds} second long YouTube video.",
    "A sacrifice must be made. The letters '{a}' and '{b}' have been sacrificed.",
    "Your password must contain twice as many italic characters as bold.",
    "Your password must include the length of your password.",
    "The length of your password must be a prime number.",
)
INSTRUCTIONS = ("You are playing the Password Game. Write a password that satisfies every rule "
                "shown. Formatting: **bold**, *italic*, \\* for a literal asterisk. Length counts "
                "plain characters. Answer with the password only.")
ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
VIDEO_ID = ALNUM + "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_"


def _fill(rng: random.Random, sentence: str) -> str:
    a, b = rng.sample("bcdfghjkpqwxz", 2)
    return sentence.format(
        captcha="".join(rng.choice(ALNUM) for _ in range(5)), word=rng.choice(WORDS),
        moon=rng.choice(MOONS), country=rng.choice(COUNTRIES), minutes=rng.randint(1, 59),
        seconds=rng.randint(0, 59), a=a, b=b)


def _markup(rng: random.Random, s: str) -> str:
    """Bold vowels and italicise some other characters, like a rule-19/26 answer."""
    out = []
    for ch in s:
        if ch in "aeiouAEIOU":
            out.append(f"**{ch}**")
        elif ch.isalpha() and rng.random() < 0.3:
            out.append(f"*{ch}*")
        else:
            out.append(ch)
    return "".join(out)


def random_password(rng: random.Random) -> str:
    pieces: list[Callable[[], str]] = [
        lambda: rng.choice(MONTHS) if rng.random() < 0.5 else rng.choice(MONTHS).lower(),
        lambda: rng.choice(SPONSORS).capitalize() if rng.random() < 0.5 else rng.choice(SPONSORS),
        lambda: rng.choice(ROMANS),
        lambda: rng.choice(ELEMENTS),
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4))),
        lambda: rng.choice(MOONS),
        lambda: rng.choice((EGG, CHICKEN)),
        lambda: WORM * rng.randint(1, 8),
        lambda: LIFTER * rng.randint(1, 3),
        lambda: rng.choice(AFFIRMATIONS),
        lambda: rng.choice(LEAP_YEARS),
        lambda: rng.choice(CHESS_MOVES),
        lambda: rng.choice(COUNTRIES),
        lambda: rng.choice(WORDS),
        lambda: "".join(rng.choice(ALNUM) for _ in range(5)),
        lambda: "youtu.be/" + "".join(rng.choice(VIDEO_ID) for _ in range(11)),
        lambda: rng.choice("!@#$%^&*?-_+=.,;:~"),
        lambda: FIRE,
    ]
    pw = "".join(rng.choice(pieces)() for _ in range(rng.randint(2, 12)))
    return _markup(rng, pw) if rng.random() < 0.4 else pw


def render_turn(rng: random.Random, n_rules: int, password: str | None, turn: int) -> str:
    lines = [INSTRUCTIONS, f"Turn {turn} of 30."]
    if password is not None:
        lines.append(f"Your last password: {password}")
    lines.append("Rules:")
    for i in range(n_rules):
        mark = rng.choice(("[x]", "[ ]", "[?]"))
        lines.append(f"{mark} Rule {i + 1}: {_fill(rng, RULE_SENTENCES[i % len(RULE_SENTENCES)])}")
    return "\n".join(lines)


def chat(messages: list[tuple[str, str]], think: bool = True) -> str:
    """Qwen-style chat markup (what the policy reads and writes)."""
    out = []
    for role, content in messages:
        if role == "assistant" and think:
            content = "<think>\n\n</think>\n\n" + content
        out.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
    return "".join(out)


def builtin_texts(seed: int = 0, n_turns: int = 300, n_passwords: int = 1500) -> list[str]:
    rng = random.Random(seed)
    texts = list(RULE_SENTENCES) + [INSTRUCTIONS, " ".join(MONTHS), " ".join(MOONS)]
    texts += [_fill(rng, s) for s in RULE_SENTENCES for _ in range(3)]
    texts += [random_password(rng) for _ in range(n_passwords)]
    for turn in range(n_turns):
        pw = random_password(rng)
        obs = render_turn(rng, rng.randint(1, len(RULE_SENTENCES)), pw if turn % 3 else None,
                          turn % 30)
        texts.append(chat([("system", INSTRUCTIONS), ("user", obs), ("assistant", pw)],
                          think=bool(turn % 2)))
    return texts


def game_texts(max_seeds: int = 4) -> list[str]:
    """Text from the Password Game package, if importable; [] if not. Never raises."""
    try:
        import tasks.password_game as pg
    except Exception:
        return []
    fn = getattr(pg, "corpus_texts", None)
    if callable(fn):
        try:
            return [str(t) for t in fn()]
        except Exception:
            pass
    texts: list[str] = []
    # Constant rule texts ignore the instance, so they work even if instance data is missing.
    for rule in getattr(pg, "RULES", ()):
        for hatched in (False, True):
            try:
                texts.append(str(rule.text(None, hatched)))
            except Exception:
                pass
    # Rendered first turns and solver answers of a few seeded instances.
    for seed in range(max_seeds):
        try:
            game = pg.PasswordGame()
            texts.append(str(game.reset(seed=seed)["text"]))
            texts.append(str(pg.solve(pg.make_instance(seed))))
            for i in range(getattr(pg, "NUM_RULES", 0)):
                texts.append(str(pg.rule_text(i, pg.make_instance(seed))))
        except Exception:
            break
    return texts


def corpus_texts(seed: int = 0) -> list[str]:
    """The tokenizer corpus: the game's own text first, then the built-in generator."""
    return game_texts() + builtin_texts(seed)
