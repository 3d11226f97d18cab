"""Wordle (``tasks.wordle``) on the trainer's side: everything specific to it.

The system prompt; the guess in an answer (``extract_guess``); the board after a guess
(``wordle_feedback``); the held-out answers of evaluation (``wordle_heldout_answers``: training
never draws them); the numbers kept per turn (valid, repeated, greens), the evaluation columns
and the failure replay's priority; random answer words (format) and an expert (openers, then
consistent answers) as warm-start demonstrations; the entropy solver and random words as
reference agents; the sample table's columns (answer | guesses with their marks | result); the
pieces past the trainer (``gamerl.games.pieces``): its server's port, its env_config.json keys
(``WORDLE_ENV_KEYS``, its task_config: ``CONFIG_FILES``), its ``configure`` questions
(``WIZARD``) and its verl bridge spec (``verl_spec``); what it changes in a preset
(``WORDLE_PRESETS``).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Mapping, Optional, Sequence

from tasks.wordle.game import fits_marks  # the game's check, which its fit_reward pays

from .base import (Instance, MakeEnv, ReportColumn, SampleTable, Task, after_marker, code_span,
                   elide, eval_split, instance_key)
from .pieces import (ConfigFiles, VerlSpec, WizardQuestions, task_config_reader,
                     task_config_writer)

__all__ = ["WORDLE_ENV_KEYS", "WORDLE_HELDOUT", "WORDLE_LETTERS_PROMPT", "WORDLE_PRESETS",
           "extract_guess", "fits_marks", "keeps_greens", "make_task", "reads_the_marks",
           "spell", "verl_spec", "wordle_config", "wordle_env_settings", "wordle_feedback",
           "wordle_heldout_answers"]

_EMPHASIS = "*_"
_TRAILING = ".!?"
WORDLE_HELDOUT = 256  # held-out answers (evaluation only; 128 until 2026-11-25, its first half)
# the system prompt of the ``letters`` feedback: the guess spelled out, as its feedback shows words
WORDLE_LETTERS_PROMPT = ("You are playing Wordle. Reply with your next guess only, spelled out: "
                         "its 5 letters in capitals, separated by spaces, like C R A N E.")


def extract_guess(answer: str) -> str:
    """The guess in a model's answer: ``base.extract_answer``'s rule with ``Guess:`` as a marker
    too, then emphasis (``*``, ``_``) around the word and trailing ``.!?`` removed; a word
    spelled out as five single letters (``C R A N E``, the ``letters`` feedback's answer) is
    joined (``CRANE``). The game itself lowercases and strips whitespace
    (``tasks.wordle.normalize_guess``)."""
    word = after_marker(answer, "guess")
    word = word.strip(_EMPHASIS).rstrip(_TRAILING).strip(_EMPHASIS).strip()
    letters = word.split()
    if len(letters) == 5 and all(len(x) == 1 and x.isalpha() for x in letters):
        return "".join(letters)
    return word


def spell(word: str) -> str:
    """``crane`` -> ``C R A N E``: a word as the ``letters`` feedback shows it and asks for it."""
    return " ".join(word.upper())


def wordle_feedback(obs: Mapping[str, Any], info: Mapping[str, Any], action: str,
                    style: str = "compact") -> str:
    """The observation after a guess.

    * ``full``: the game's whole text (instructions, the board so far, the letters, the guesses
      left);
    * ``compact`` (default): without the instructions paragraph (the first message has it);
    * ``latest``: only what changed: the board's last line (this guess and its marks, or why it
      wasted the turn), the greens in place (``In place: C _ A N E``), the letters, the guesses
      left. The earlier lines are already in the conversation, and repeating the whole board
      every turn makes a 6-guess game grow quadratically (SmolLM2's tokenizer, a lost 6-guess
      game: the six messages after the guesses are 794 tokens compact, 471 latest; a mark emoji
      is 3 tokens). The greens' positions are spelled out because a small model cannot line up
      a row of emoji with the letters above it; the game's text only implies them.
    * ``letters``: ``latest`` with the guess spelled out, each letter beside its mark
      (``2. C🟩 L⬜ I⬜ N🟩 T⬜``), for a model that answers letter by letter (``C R A N E``:
      ``WORDLE_LETTERS_PROMPT``). To SmolLM2 a 5-letter word is 1-3 tokens (513 of the 2,309
      answers are one token), so which letter sits where is not in its input; spelled, every
      letter is a token of its own, next to what the game said of it.
    """
    from tasks.wordle.game import INSTRUCTIONS

    text = obs["text"]
    if style == "full" or not text.startswith(INSTRUCTIONS):
        return text
    lines = text[len(INSTRUCTIONS):].lstrip("\n").split("\n")
    if style not in ("latest", "letters") or "Board:" not in lines:
        return "\n".join(lines)
    start = lines.index("Board:") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("Letters:")),
               len(lines))
    board = lines[start:end]
    last = [_spelled_line(board[-1])] if style == "letters" and board else board[-1:]
    return "\n".join(last + _in_place(obs) + lines[end:])


def _spelled_line(line: str) -> str:
    """``2. CLINT  🟩⬜⬜🟩⬜ ...`` -> ``2. C🟩 L⬜ I⬜ N🟩 T⬜ ...``; a line without a scored
    guess (a wasted turn) as it is."""
    number, _, rest = line.partition(". ")
    parts = rest.split("  ", 2)
    if len(parts) < 2 or len(parts[0]) != 5 or len(parts[1]) != 5 or not parts[0].isalpha():
        return line
    spelled = " ".join(letter + mark for letter, mark in zip(parts[0], parts[1]))
    return f"{number}. {spelled}" + ("  " + parts[2] if len(parts) > 2 else "")


def _board(obs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The guesses so far with their marks, ``[(word, marks), ...]``: the history the solver
    and the expert read."""
    return list(zip(obs.get("guesses") or [], obs.get("marks") or []))


def _in_place(obs: Mapping[str, Any]) -> list[str]:
    """``["In place: C _ A N E"]``: every letter that has been green, in its position (``_``
    where none has); ``[]`` before the first valid guess."""
    known = ["_"] * 5
    for word, marks in _board(obs):
        for i, (letter, mark) in enumerate(zip(word, marks)):
            if mark == "green":
                known[i] = letter.upper()
    return ["In place: " + " ".join(known)] if obs.get("guesses") else []


def wordle_heldout_answers(n: int = WORDLE_HELDOUT) -> tuple[str, ...]:
    """A fixed, diverse held-out set: every (2309/n)-th answer in alphabetical order, so all
    first letters and letter patterns are represented. Training never draws these answers.

    Ordered so that the first n/2 are the set of n/2 words (every second word, then the others):
    an evaluation of 128 games plays the same 128 answers with ``n`` 256 as it did with 128."""
    from tasks.wordle import answers

    words = sorted(answers())
    picked = [words[(i * len(words)) // n] for i in range(n)]
    return tuple(picked[0::2] + picked[1::2])


def keeps_greens(word: str, history) -> bool:
    """Whether ``word`` keeps every letter found green in ``history`` in its place (True before
    any green: there is nothing to keep)."""
    return all(word[j] == g[j] for g, m in history for j in range(5) if m[j] == "green")


def reads_the_marks(episodes) -> dict:
    """Whether a player's guesses use what the board told it, over its valid guesses after the
    first (each episode's ``last_obs`` record: ``guesses`` and ``marks``):

    * ``fits_marks_rate``: the fraction that could still be the answer, i.e. would have given
      every earlier guess the marks it got (every guess of a perfect reader of the board);
    * ``kept_greens_rate``: the fraction that keep every letter found green so far in place
      (a guess before any green keeps them: there is nothing to keep).

    A guess that fits the marks keeps the greens; a fixed opener (the expert's CLINT) rarely
    fits them. On the 256 held-out words random answer words score 41.5% and 2.3%, the entropy
    solver 74.6% and 62.0% (docs/benchmarks.md). NaN where no episode has a second valid
    guess."""
    fits = kept = total = 0
    for ep in episodes:
        obs = ep.last_obs or {}
        board = _board(obs)
        for i in range(1, len(board)):
            word, before = board[i][0], board[:i]
            total += 1
            fits += fits_marks(word, before)
            kept += keeps_greens(word, before)
    if total == 0:
        return {"fits_marks_rate": float("nan"), "kept_greens_rate": float("nan")}
    return {"fits_marks_rate": fits / total, "kept_greens_rate": kept / total}


def wordle_config(cfg):
    from tasks.wordle import WordleConfig

    return WordleConfig(**dict(cfg.task_config or {}))


# ----------------------------------------------------------------------------- sample table

_MARK_EMOJI = {"green": "🟩", "yellow": "🟨", "grey": "⬜", "gray": "⬜"}


def _sample_answer(ep) -> Optional[str]:
    """The episode's answer word: its instance's, else what the game said at the end."""
    if isinstance(ep.instance, dict) and ep.instance.get("answer"):
        return str(ep.instance["answer"])
    for said in (ep.last_obs or {}, ep.final_info or {}):
        if said.get("answer"):
            return str(said["answer"])
    return None


def _sample_guesses(ep, answer: Optional[str]) -> list[str]:
    """One entry per turn: ``GUESS 🟩⬜…`` for a valid guess, ``✗ `text` `` for a wasted turn.

    The game's own record (``last_obs["attempts"]`` and ``["marks"]``) when there is one; else
    the turns' actions, scored with ``tasks.wordle.feedback`` when the answer is known (episodes
    rebuilt from records have no board)."""
    obs = ep.last_obs or {}
    attempts, marks = obs.get("attempts"), obs.get("marks")
    out: list[str] = []
    if attempts is not None and marks is not None and len(attempts) == len(ep.turns):
        scored = iter(marks)
        for attempt in attempts:
            if attempt.get("valid"):
                m = next(scored, None) or []
                out.append(f"{attempt['guess'].upper()} "
                           f"{''.join(_MARK_EMOJI.get(x, '?') for x in m)}")
            else:
                out.append(f"✗ {code_span(attempt.get('guess', ''))}")
        return out
    for t in ep.turns:
        if t.stats.get("valid") and answer:
            from tasks.wordle import feedback

            m = feedback(answer, t.action.strip().lower())
            out.append(f"{t.action.strip().upper()} {''.join(_MARK_EMOJI[x] for x in m)}")
        elif t.stats.get("valid"):
            out.append(t.action.strip().upper())
        else:
            out.append(f"✗ {code_span(t.action)}")
    return out


def _sample_result(ep) -> str:
    if ep.success:
        return f"solved in {len(ep.turns)}"
    return "not solved (context full)" if ep.context_exhausted else "not solved"


def _sample_row(ep) -> list[str]:
    answer = _sample_answer(ep)
    guesses = elide(_sample_guesses(ep, answer))
    return [answer.upper() if answer else "?",
            " → ".join(guesses) if guesses else "(no guess)", _sample_result(ep)]


# one row per answer word, however the instances around it differ
SAMPLE_TABLE = SampleTable(header=("answer", "guesses", "result"), row=_sample_row,
                           key=lambda ep: _sample_answer(ep) or instance_key(ep))


# ------------------------------------------------------- the run's files, configure, verl

WORDLE_ENV_KEYS = ("max_guesses", "hard_mode", "reward")  # env_config.json's: its task_config


def wordle_env_settings(max_guesses: int = 6, hard_mode: bool = False) -> dict:
    """Wordle's task_config with every setting written out (so the file shows them)."""
    from dataclasses import asdict

    from tasks.wordle.game import RewardConfig

    return {"max_guesses": max_guesses, "hard_mode": hard_mode, "reward": asdict(RewardConfig())}


def _check_env(settings: dict, where: str, checks) -> None:
    """env_config.json's Wordle keys, checked by ``WordleConfig`` itself (max_guesses 1..100,
    finite rewards >= 0)."""
    from dataclasses import fields

    from tasks.wordle.game import RewardConfig, WordleConfig

    if "reward" in settings:
        settings["reward"] = checks.reward_object(settings,
                                                  [f.name for f in fields(RewardConfig)], where)
    try:
        WordleConfig(**settings)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


CONFIG_FILES = ConfigFiles(
    env_keys=WORDLE_ENV_KEYS, read=task_config_reader(_check_env),
    write=task_config_writer(WORDLE_ENV_KEYS),
    env_comment=(
        "Wordle environment (tasks/wordle/README.md). execution: local_wordle (in-process) or "
        "http (then base_url, a server from `python -m tasks.wordle.server`).",
        "max_guesses per game; hard_mode: every revealed hint must be used; reward: the "
        "per-turn rewards (win_reward, turn_decay, green_reward, present_reward, "
        "invalid_penalty, repeat_penalty, loss_penalty, latest_green_reward, fit_reward)."),
    env_holds="Wordle's settings",
    train_comments={
        "game": "Turns per game: env_config.json's max_guesses (max_steps is not used by "
                "Wordle).",
        "sampling": "Per turn: one guess, a 5-letter word of a few tokens (max_new_tokens 8).",
        "schedule": "epochs x episodes_per_epoch training games; eval_episodes held-out games "
                    "(answers training never draws).",
        "instances": "Wordle has no curriculum (OpenSpiel and the Password Game have one): keep "
                     "curriculum null."},
)


def _wizard_questions(cfg, wizard):
    settings = cfg.task_config or wordle_env_settings()

    def valid_guesses(n: int) -> None:
        if n > 100:
            raise ValueError(f"expected at most 100 guesses, got {n}")

    guesses = wizard.question("Guesses per game", settings.get("max_guesses", 6),
                              wizard.int_at_least(1), validate=valid_guesses)
    hard = wizard.question("Hard mode (every revealed hint must be used in later guesses)?",
                           bool(settings.get("hard_mode", False)), wizard.yes_no)
    return wizard.checked(cfg, task_config={
        **wordle_env_settings(guesses, hard),
        "reward": settings.get("reward", wordle_env_settings()["reward"])})


WIZARD = WizardQuestions(
    defaults=lambda cfg, model: cfg.replace(task_config=wordle_env_settings()),
    ask=_wizard_questions)


def verl_spec() -> VerlSpec:
    """The verl bridge's Wordle: WordleConfig's defaults; the secret is the answer word."""
    from dataclasses import asdict

    from tasks.wordle import LocalWordleEnv, WordleConfig, make_instance

    return VerlSpec(title="Wordle", config_cls=WordleConfig,
                    default_config=lambda: asdict(WordleConfig()), make_env=LocalWordleEnv,
                    secret=lambda seed, config: make_instance(seed).answer,
                    max_turns=lambda config: config.max_guesses)


# ----------------------------------------------------------------------------- presets

# What Wordle changes in a preset (gamerl/config/presets.py's PRESETS; ``get_config``
# applies these over the preset, under the caller's overrides). Wordle's rewards are O(1)
# already (reward_scale 1: the Password Game's 0.1 or 0.02 would shrink them).
WORDLE_PRESETS: dict[str, dict[str, Any]] = {
    # tiny: a word is 2-5 tokens (max_new_tokens 8); 6 guesses with compact feedback are
    # ~600-900 tokens; the warm start teaches random valid answer words (format, not skill: RL
    # must find better guesses).
    "tiny": dict(max_new_tokens=8, max_context_tokens=2048, reward_scale=1.0,
                 warmstart_steps=200, epochs=20, lr=1e-4),
    # No warm start (the preset's expert warm start is the Password Game's recipe; Wordle's
    # expert, tasks/wordle/solver.py::expert_guess, is not measured with Qwen3-0.6B).
    "qwen3-0.6b": dict(max_new_tokens=64, advantage_estimator="grpo", group_size=4,
                       reward_scale=1.0, warmstart=False),
    # SmolLM2 on 2 CPU cores (results: docs/results.md): zero-shot every answer is chatter (no
    # valid guess, no signal), so the warm start plays the expert (two openers, then answers
    # that fit every mark) on every layer, which the top 4 alone did not learn to read the
    # board from; PPO then trains the top 4. "latest": the last board line only (a game ~610
    # tokens, not ~900); a repeated guess costs what an invalid one does; all 256 held-out
    # answers, 64 games at a time (the KV cache of 256 at once took 20 GB).
    "smollm2-135m": dict(max_new_tokens=8, reward_scale=1.0, warmstart=True,
                         warmstart_all_layers=True, warmstart_examples=512,
                         warmstart_steps=64, warmstart_batch_size=8, warmstart_lr=3e-4,
                         epochs=8, lr=5e-5, feedback="latest", eval_episodes=256,
                         eval_batch_size=64,
                         task_config={"reward": {"repeat_penalty": 0.1}}),
}


# ----------------------------------------------------------------------------- the task

def _env_factory(cfg) -> MakeEnv:
    from tasks.wordle import LocalWordleEnv

    config = wordle_config(cfg)
    return lambda: LocalWordleEnv(config)


def _http_factory(cfg, base_url: str) -> MakeEnv:
    from dataclasses import asdict

    from tasks.wordle import WordleEnv

    c = wordle_config(cfg)
    return lambda: WordleEnv(base_url, max_guesses=c.max_guesses, hard_mode=c.hard_mode,
                             reward=asdict(c.reward))


def _start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
    env = make_env()
    return env, env.reset(answer=instance["answer"])


def _train_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
    from tasks.wordle import answers

    held = set(wordle_heldout_answers())
    pool = [w for w in answers() if w not in held]
    return [{"seed": s, "answer": pool[random.Random(s).randrange(len(pool))]} for s in seeds]


def _eval_instances(cfg, n: int, overrides: Optional[dict] = None) -> list:
    """The test games play the held-out answers (never trained on); the validation games,
    which only choose a checkpoint, answers of the training pool drawn by their seeds."""
    seeds = cfg.eval_seeds(n, eval_split(overrides))
    if eval_split(overrides) == "validation":
        return _train_instances(cfg, seeds)
    held = wordle_heldout_answers()
    return [{"seed": s, "answer": held[i % len(held)]} for i, s in enumerate(seeds)]


def _turn_stats(info: dict) -> dict:
    return {"valid": bool(info.get("valid")), "repeated": bool(info.get("repeated")),
            "greens": sum(m == "green" for m in (info.get("marks") or [])),
            "success": bool(info.get("success"))}


def _metrics(episodes, cfg) -> dict:
    n = max(len(episodes), 1)
    turns = [t for ep in episodes for t in ep.turns]
    wins = [len(ep.turns) for ep in episodes if ep.success]
    return {**reads_the_marks(episodes),
            "guesses_when_solved": sum(wins) / len(wins) if wins else float("nan"),
            "invalid_rate": sum(not t.stats.get("valid") for t in turns) / max(len(turns), 1),
            "repeat_rate": sum(t.stats.get("repeated", False) for t in turns)
            / max(len(turns), 1),
            "best_greens": sum(max((t.stats.get("greens", 0) for t in ep.turns), default=0)
                               for ep in episodes) / n}


def _badness(ep, cfg) -> float:
    if ep.success:
        return 0.0
    return 1.0 - max((t.stats.get("greens", 0) for t in ep.turns), default=0) / 5 * 0.5


def _said(cfg) -> Callable[[str], str]:  # a word as the run's model is asked to write it
    return spell if cfg.feedback == "letters" else (lambda word: word)


def _demo(cfg, rng: random.Random) -> Callable:
    from tasks.wordle import answers

    words, write = answers(), _said(cfg)
    return lambda ep: write(rng.choice(words))  # a valid word, feedback ignored: format


def _expert_demo(cfg, rng: random.Random) -> Callable:
    from tasks.wordle.solver import expert_guess

    write = _said(cfg)
    # the openers, then an answer consistent with every mark
    return lambda ep: write(expert_guess(_board(ep.last_obs), rng))


def _reference_agents(cfg) -> dict:
    from tasks.wordle import answers
    from tasks.wordle.solver import default_solver

    solver = default_solver()
    words = answers()

    def solver_answer(ep) -> str:
        obs = ep.last_obs
        return solver.next_guess(_board(obs))

    def random_answer(ep) -> str:
        return random.Random(f"{cfg.seed}:{ep.seed}:{len(ep.turns)}").choice(words)

    return {"solver": solver_answer, "random": random_answer}


def make_task() -> Task:
    return Task(
        name="wordle",
        system_prompt="You are playing Wordle. Reply with your next guess only: one 5-letter word.",
        feedback_styles=("compact", "full", "latest", "letters"),
        system_prompts={"letters": WORDLE_LETTERS_PROMPT},
        extract=extract_guess, feedback=wordle_feedback,
        env_factory=_env_factory, http_env_factory=_http_factory, start=_start,
        train_instances=_train_instances, eval_instances=_eval_instances,
        game_text=lambda cfg, instance: instance["answer"],
        turn_stats=_turn_stats, metrics=_metrics, badness=_badness, demo=_demo,
        expert_demo=_expert_demo,
        reference_agents=_reference_agents,
        max_turns=lambda cfg: wordle_config(cfg).max_guesses,
        headline=("best_greens",),
        # The entropy solver wins every held-out game in 3.5 guesses on average; a policy that
        # finds words in fewer guesses could out-earn it, so it is not called a bound.
        reference_labels={"solver": "entropy solver (wins every game)",
                          "random": "random answer words"},
        metric_descriptions={
            "success_rate": "games won: the word found within the guesses",
            "best_greens": "greens in the best guess (mean, of 5)",
            "guesses_when_solved": "guesses per solved game (mean)",
            "invalid_rate": "invalid guesses (fraction of turns)",
            "repeat_rate": "repeated guesses (fraction of turns)",
            "fits_marks_rate": "valid guesses after the first that could still be the answer "
                               "(fit every earlier mark)",
            "kept_greens_rate": "valid guesses after the first that keep every green in place"},
        # a win is rare for a small model: the guesses' validity and greens show the progress
        report_columns=(ReportColumn("reward", "reward"),
                        ReportColumn("invalid_rate", "invalid guesses", "{:.1%}"),
                        ReportColumn("repeat_rate", "repeated guesses", "{:.1%}"),
                        ReportColumn("best_greens", "best greens (of 5)"),
                        ReportColumn("kept_greens_rate", "kept greens", "{:.1%}"),
                        ReportColumn("fits_marks_rate", "fit the marks", "{:.1%}"),
                        ReportColumn("success_rate", "won", "{:.1%}")),
        sample_table=SAMPLE_TABLE,
        server_port=8001, config_files=CONFIG_FILES, wizard=WIZARD, verl=verl_spec,
        presets=WORDLE_PRESETS,
    )
