"""The Password Game's curriculum over the number of rules (gamerl.games.password_game,
gamerl.core.curriculum): stages "first-N" up to the run's num_rules, instances that carry their
stage's rule count into the game (in-process and over HTTP), a bonus a stage can earn, the
replay's badness and the expert's first password of the instance's rules, and a tiny run whose
curriculum moves from one rule to four while the held-out games keep the run's four."""

import json

import pytest

from gamerl.config import TrainConfig, get_config
from gamerl.core.curriculum import Curriculum
from gamerl.core.rollout import Episode, Turn
from gamerl.games import get_task
from gamerl.games.password_game import expert_answer, password_solver_answer

TASK = get_task("password_game")


def _episode(instance, obs=None) -> Episode:
    seed = instance["seed"] if isinstance(instance, dict) else instance
    return Episode(seed=seed, token_ids=[], policy_mask=[], gen_logprobs=[], rewards=[],
                   prompt_len=0, instance=instance, last_obs=obs or {})


def _stage(name: str, *games: str) -> dict:
    return {"name": name, "games": list(games or [name]), "opponent": None}


@pytest.mark.parametrize("num_rules, names", [(26, ["first-6", "first-12", "first-26"]),
                                              (12, ["first-6", "first-12"]),
                                              (6, ["first-6"]), (4, ["first-4"])])
def test_default_stages_end_at_the_runs_num_rules(num_rules, names):
    cfg = TrainConfig(num_rules=num_rules, curriculum="default")
    cur = Curriculum.from_dict("default", choices=TASK.curriculum.for_run(cfg))
    assert [s.name for s in cur.stages] == names
    assert all(s.opponent is None and s.threshold == 0.5 for s in cur.stages)
    assert all("opponent" not in s for s in cur.to_dict()["stages"])  # no key the game lacks


def test_stages_past_num_rules_or_naming_an_opponent_are_refused():
    with pytest.raises(ValueError, match=r"unknown games \['first-26'\]"):
        TrainConfig(num_rules=12, curriculum=[{"name": "a", "games": ["first-26"]}])
    with pytest.raises(ValueError, match="no opponent .*'random'"):
        TrainConfig(num_rules=12, curriculum=[{"name": "a", "games": ["first-6"],
                                               "opponent": "random"}])


def test_a_stage_instance_plays_its_rules_and_can_earn_the_bonus():
    """r12's bonus is paid at 12 rules, a win; in a 6-rule stage it is paid for winning those
    6 (capped), not never. Without a stage the instance is a seed and plays the run's 12."""
    cfg = TrainConfig(num_rules=12, bonus_min_rules=12, max_steps=3, reward_mode="delta")
    [inst] = TASK.train_instances(cfg, [7], _stage("first-6"))
    assert inst == {"seed": 7, "num_rules": 6}
    assert TASK.train_instances(cfg, [7], None) == [7]
    make_env = TASK.env_factory(cfg)
    for instance, rules in ((inst, 6), (7, 12)):
        env, obs = TASK.start(make_env, instance)
        game = env.game.config
        assert game.num_rules == rules and game.reward.bonus_min_rules == rules
        solver = password_solver_answer(_episode(instance, obs))  # holds every rule
        _, reward, done, info = env.step(solver)
        assert done and info["success"] and info["num_revealed"] == rules
        assert reward > cfg.episode_bonus  # the bonus is in it
    # over HTTP the session is opened with the stage's rules (no server needed to build it)
    client = TASK.http_env_factory(cfg, "http://127.0.0.1:9")(inst)
    assert client.num_rules == 6 and client.reward["bonus_min_rules"] == 6


def test_badness_and_the_experts_first_password_use_the_instance_rules():
    import random

    from tasks.password_game import make_instance
    from tasks.password_game.demos import KNOWN_AHEAD
    from tasks.password_game.richtext import parse
    from tasks.password_game.rules import check_rules

    cfg = TrainConfig(num_rules=12, warmstart_extra_prob=1.0)  # every rule known ahead
    inst = {"seed": 3, "num_rules": 6}
    ep = _episode(inst)
    ep.turns.append(Turn(answer="x", action="x", reward=0.0, success=True, n_tokens=1,
                         last_token=0, stats={"rules_satisfied": 6}))
    assert TASK.badness(ep, cfg) == 0.0  # all of its stage's rules: nothing to replay
    ep.instance = 3
    assert TASK.badness(ep, cfg) == pytest.approx(0.5)  # 6 of the run's 12
    first = expert_answer(cfg, random.Random(0))
    ahead = [r for r in KNOWN_AHEAD if r < 12]
    for instance, rules in ((inst, 6), (3, 12)):
        held = check_rules(parse(first(_episode(instance))), make_instance(3), n_revealed=12)
        assert all(held[r] for r in ahead if r < rules)
        assert all(held[r] for r in ahead) == (rules == 12)  # a 6-rule stage's: its 6 rules


def test_tiny_run_moves_from_one_rule_to_four_and_evaluates_on_four(tiny_dir, tmp_path, caplog,
                                                                    capsys):
    """A 1-rule stage (5+ characters) is won by almost any answer, so the curriculum leaves it
    after its first window; the episodes played say which stage each came from; the held-out
    evaluation plays the run's 4 rules; last/ keeps the curriculum's progress for a resume. The
    stage change is said once where the log prints INFO (as the CLI's does; it was printed
    twice there)."""
    import logging

    from gamerl.core.trainer import Trainer

    cfg = get_config("tiny", model=str(tiny_dir), num_rules=4, max_steps=2, max_new_tokens=12,
                     episodes_per_epoch=8, minibatch_size=4, ppo_epochs=1, eval_episodes=4,
                     epochs=2, warmstart=False, wandb_mode="disabled", progress=False,
                     device="cpu", curriculum_window=8,
                     curriculum=[{"name": "first-1", "games": ["first-1"], "threshold": 0.5},
                                 {"name": "first-4", "games": ["first-4"], "threshold": 0.5}])
    trainer = Trainer(cfg, run_dir=tmp_path / "run")
    with caplog.at_level(logging.INFO, logger="gamerl"):
        trainer.train()
    said = capsys.readouterr().out + caplog.text
    assert said.count("stage 'first-1' -> 'first-4'") == 1
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").open()]
    by_epoch = {e: {r["instance"]["num_rules"] for r in records if r["epoch"] == e}
                for e in (0, 1)}
    assert by_epoch == {0: {1}, 1: {4}}
    assert sum(r["success"] for r in records if r["epoch"] == 0) >= 4
    state = json.loads((tmp_path / "run" / "last" / "trainer_state.json").read_text())
    assert state["curriculum"]["stage"] == "first-4"
    assert state["curriculum"]["history"][0]["from"] == "first-1"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert len(summary["final"]["per_rule_pass_rate"]) == 4  # the held-out games: 4 rules


def test_a_curriculum_round_trips_through_the_json_config_files(tmp_path):
    """The run's train_config.json keeps the stages (no opponent key) and loads them back."""
    from gamerl.config.jsonconfig import load_run_config, write_run_config

    stages = [{"name": "first-6", "games": ["first-6"], "threshold": 0.6},
              {"name": "first-12", "games": ["first-12"]}]
    cfg = get_config("smollm2-135m-r12", curriculum=stages, curriculum_window=32)
    train_path, env_path = write_run_config(cfg, tmp_path)
    back, _ = load_run_config(train_path, env_path)
    assert (back.curriculum, back.curriculum_window, back.num_rules) == (stages, 32, 12)


def test_stages_are_checked_against_num_rules_from_either_file(tmp_path):
    """env_config.json's num_rules bounds the train file's stages: read together, not the
    base preset's 6 rules (a first-12 stage was refused before both files were read)."""
    from gamerl.config.jsonconfig import load_run_config, write_run_config

    stages = [{"name": "first-6", "games": ["first-6"]},
              {"name": "first-12", "games": ["first-12"]}]
    train_path, env_path = write_run_config(get_config("smollm2-135m-r12", curriculum=stages),
                                            tmp_path)
    cfg, _ = load_run_config(train_path, env_path, base=get_config("smollm2-135m"))
    assert (cfg.num_rules, cfg.curriculum) == (12, stages)
    env = json.loads(env_path.read_text())
    env["num_rules"] = 8
    env_path.write_text(json.dumps(env))
    with pytest.raises(ValueError, match=r"env_config.json: .*unknown games \['first-12'\]"):
        load_run_config(train_path, env_path)


def test_a_run_without_a_curriculum_keeps_its_bonus_threshold():
    """Only a stage's smaller game caps the bonus: a run's own game of 6 rules with the bonus
    from 10 rules on pays none, as before the curriculum existed."""
    cfg = TrainConfig(num_rules=6, bonus_min_rules=10)
    env, _ = TASK.start(TASK.env_factory(cfg), 7)
    assert env.game.config.reward.bonus_min_rules == 10
