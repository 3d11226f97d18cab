"""gamerl.core.curriculum: advancing exactly at the thresholds, only on a full window, a fresh
window per stage, "mastered" on the last stage, config parsing and the resume round trip; the
stages' names checked against the game's (``Task.curriculum``: OpenSpiel's here), and a game
without a curriculum refused."""

import json
import logging

import pytest

from gamerl.core.curriculum import Curriculum, Stage, default_stages
from gamerl.games import get_task
from gamerl.games.openspiel import OPENSPIEL_CURRICULUM, supported_games

CHOICES = OPENSPIEL_CURRICULUM


def _stream(successes: int, failures: int) -> list[bool]:
    return [True] * successes + [False] * failures


def test_default_stages():
    assert get_task("openspiel").curriculum is CHOICES
    easy, medium, hard = default_stages(CHOICES)
    assert (easy.games, easy.opponent, easy.threshold) == (("tic_tac_toe", "kuhn_poker"), "random", 0.60)
    assert set(medium.games) >= {"connect_four", "leduc_poker", "liars_dice"}
    assert set(medium.games) & {"hex", "othello", "breakthrough"}
    assert (medium.opponent, medium.threshold) == ("random", 0.50)
    assert (set(hard.games), hard.opponent, hard.threshold) == (set(supported_games()), "mcts", 0.40)
    from tasks.openspiel.game import supported_games as registry  # the same list as the env's
    assert supported_games() == registry()


def test_advances_exactly_at_threshold(caplog):
    cur = Curriculum([Stage("a", ["tic_tac_toe"], "random", 0.5),
                      Stage("b", ["hex"], "mcts", 0.75)], window=8)
    assert cur.update(_stream(0, 5) + _stream(3, 0)) is None  # 3/8 = 0.375 < 0.5
    assert cur.stage.name == "a" and cur.success_rate == 3 / 8
    with caplog.at_level(logging.INFO, logger="gamerl"):
        note = cur.update([True])  # the oldest failure falls out: 4/8 = 0.5 exactly
    assert note is not None and cur.stage.name == "b" and "'a' -> 'b'" in note
    assert note in caplog.text  # also logged on the "gamerl" logger
    assert len(cur.recent) == 0 and cur.success_rate is None  # a fresh window for stage b
    assert cur.history == [{"from": "a", "to": "b", "episode": 9, "rate": 0.5}]


def test_no_advance_before_window_full():
    cur = Curriculum([Stage("a", ["tic_tac_toe"], threshold=0.6), Stage("b", ["hex"])], window=64)
    assert cur.update([True] * 63) is None  # 100% but only 63 episodes
    assert cur.stage.name == "a" and cur.success_rate == 1.0
    assert cur.update([True]) is not None and cur.stage.name == "b"


def test_threshold_boundary_with_default_window():
    # 0.60 of 64 is 38.4: 38 successes (0.594) stay, 39 (0.609) advance.
    cur = Curriculum.default(choices=CHOICES, window=64)
    assert cur.update(_stream(38, 26)) is None and cur.stage.name == "easy"
    cur = Curriculum.default(choices=CHOICES, window=64)
    assert cur.update(_stream(39, 25)) is not None and cur.stage.name == "medium"
    # medium at 0.50: exactly 32 of 64 advances to hard.
    assert cur.update(_stream(31, 33)) is None and cur.stage.name == "medium"
    cur2 = Curriculum.default(choices=CHOICES, window=64)
    cur2.update(_stream(39, 25))
    assert cur2.update(_stream(32, 32)) is not None and cur2.stage.name == "hard"
    assert cur2.stage.opponent == "mcts"


def test_window_resets_and_rest_of_batch_is_dropped():
    cur = Curriculum([Stage("a", ["tic_tac_toe"], threshold=1.0),
                      Stage("b", ["hex"], threshold=1.0)], window=4)
    # The 4th result advances; the 3 after it were played at stage "a": not counted for "b".
    note = cur.update([True] * 7)
    assert note is not None and cur.stage.name == "b"
    assert len(cur.recent) == 0 and cur.episodes == 4
    assert cur.update([True] * 3) is None  # window not full yet at stage b
    assert cur.update([False]) is None and not cur.mastered


def test_last_stage_mastered_without_advancing(caplog):
    cur = Curriculum([Stage("only", ["kuhn_poker"], threshold=0.5)], window=4)
    with caplog.at_level(logging.INFO, logger="gamerl"):
        assert cur.update([True, False, True, False]) is None
    assert cur.mastered and cur.stage.name == "only" and cur.index == 0
    assert caplog.text.count("mastered") == 1
    cur.update([True] * 8)
    assert caplog.text.count("mastered") == 1  # said once
    assert cur.metrics()["curriculum/mastered"] == 1.0


def test_change_point_does_not_depend_on_batching():
    stream = [bool((i * 7) % 5 < 3) for i in range(200)]  # 60% successes, interleaved
    change_points = set()
    for chunk in (1, 5, 16, 200):
        cur = Curriculum.default(choices=CHOICES, window=16)
        for i in range(0, len(stream), chunk):
            if cur.update(stream[i:i + chunk]):
                break
        change_points.add(cur.history[0]["episode"])
    assert len(change_points) == 1


def test_state_round_trip():
    cur = Curriculum.default(choices=CHOICES, window=8)
    cur.update(_stream(8, 0))  # -> medium
    cur.update([True, False, True])
    state = json.loads(json.dumps(cur.state_dict()))  # JSON-able
    again = Curriculum.from_dict(json.loads(json.dumps(cur.to_dict())), choices=CHOICES)
    again.load_state_dict(state)
    assert again.stage == cur.stage and list(again.recent) == list(cur.recent)
    assert again.state_dict() == cur.state_dict()
    # Both continue identically.
    tail = _stream(3, 2)
    assert again.update(tail) == cur.update(tail)
    assert again.state_dict() == cur.state_dict()
    other = Curriculum([Stage("x", ["hex"])])
    with pytest.raises(ValueError, match="medium"):
        other.load_state_dict(state)


def test_from_dict_and_validation():
    assert [s.name for s in Curriculum.from_dict("default", choices=CHOICES).stages] == [
        "easy", "medium", "hard"]
    cur = Curriculum.from_dict([{"name": "s1", "games": ["tic_tac_toe"], "opponent": "random",
                                 "threshold": 0.7}], window=10, choices=CHOICES)
    assert cur.window == 10 and cur.stage.games == ("tic_tac_toe",)
    assert Curriculum.from_dict({"stages": "default", "window": 5}, choices=CHOICES).window == 5
    with pytest.raises(ValueError, match="supported games"):
        Curriculum.from_dict([{"name": "bad", "games": ["chess960"]}], choices=CHOICES)
    with pytest.raises(ValueError, match="opponent"):
        Curriculum([Stage("bad", ["hex"], opponent="alphazero")], choices=CHOICES)
    with pytest.raises(ValueError, match="threshold"):
        Stage("bad", ["hex"], threshold=1.5)
    with pytest.raises(ValueError, match="unique"):
        Curriculum([Stage("a", ["hex"]), Stage("a", ["hex"])])
    with pytest.raises(ValueError, match="unknown curriculum stage keys"):
        Curriculum.from_dict([{"name": "a", "games": ["hex"], "bot": "mcts"}], choices=CHOICES)


def test_a_game_without_a_curriculum_has_none():
    """Wordle names no curriculum choices: asking for a curriculum is an error, not
    OpenSpiel's stages."""
    assert get_task("wordle").curriculum is None
    with pytest.raises(ValueError, match="no curriculum"):
        Curriculum.from_dict("default", choices=get_task("wordle").curriculum)


def test_train_config_asks_the_game_for_its_curriculum():
    """TrainConfig accepts a curriculum for a game whose Task has one, and names the game
    otherwise (no list of games in the config)."""
    from gamerl.config import TrainConfig

    assert TrainConfig(task="openspiel", curriculum="default").curriculum == "default"
    assert TrainConfig(task="password_game", curriculum="default").curriculum == "default"
    with pytest.raises(ValueError, match="curriculum: task 'wordle' has none"):
        TrainConfig(task="wordle", curriculum="default")
