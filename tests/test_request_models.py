"""The servers' reward request models are built from the games' RewardConfig dataclasses
(tasks/common/server.py::request_model_of), so a reward term added to a game is a request field at
once, with the game's default, and nothing else."""

import dataclasses
from typing import Annotated, Literal

import pytest
from pydantic import Field, ValidationError

from tasks.common.server import Weight, request_model_of
from tasks.password_game.game import RewardConfig as PasswordReward
from tasks.password_game.server import RewardModel as PasswordRewardModel
from tasks.wordle.game import RewardConfig as WordleReward
from tasks.wordle.server import RewardModel as WordleRewardModel


def _openspiel():
    pytest.importorskip("pyspiel")  # the OpenSpiel server needs open_spiel (the openspiel extra)
    from tasks.openspiel.game import RewardConfig
    from tasks.openspiel.server import RewardModel
    return RewardModel, RewardConfig


@pytest.mark.parametrize("pair", [lambda: (WordleRewardModel, WordleReward),
                                  lambda: (PasswordRewardModel, PasswordReward), _openspiel],
                         ids=["wordle", "password_game", "openspiel"])
def test_server_reward_fields_are_the_games(pair):
    model, config = pair()
    assert model.__name__ == "RewardModel"
    assert {f.name: f.default for f in dataclasses.fields(config)} == {
        name: info.default for name, info in model.model_fields.items()}
    # the defaults build the game's own config
    assert config(**model().model_dump()) == config()


def test_request_model_of_follows_a_new_field_and_keeps_the_types():
    @dataclasses.dataclass
    class Reward:
        win: float = 1.0
        new_term: float = 0.25
        mode: str = "delta"

    model = request_model_of(Reward, Weight, name="RewardModel", module=__name__,
                             types={"mode": Literal["absolute", "delta"]})
    assert model().model_dump() == {"win": 1.0, "new_term": 0.25, "mode": "delta"}
    assert model(new_term=2).new_term == 2
    for bad in ({"new_term": "2"},            # strict: no coercion from text
                {"new_term": float("inf")},   # Weight: finite
                {"mode": "other"},            # the per-field type
                {"typo": 1.0}):               # unknown fields are refused
        with pytest.raises(ValidationError):
            model(**bad)


def test_request_model_of_refuses_what_it_cannot_mirror():
    @dataclasses.dataclass
    class NoDefault:
        win: float

    with pytest.raises(TypeError, match="plain default"):
        request_model_of(NoDefault, Weight, name="M", module=__name__)
    with pytest.raises(TypeError, match="no field"):
        request_model_of(WordleReward, Weight, name="M", module=__name__,
                         types={"wn_reward": Annotated[float, Field(ge=0)]})
