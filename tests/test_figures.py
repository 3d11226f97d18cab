"""gamerl.tracking.figures: what each figure shows, checked from the description it carries in its
PNG metadata (read back from the drawn matplotlib objects), never from pixels."""

import pytest

from gamerl.tracking.figures import FIGURE_METADATA_KEY, read_figure_description, save_figures

BASE = {"reward": 4.21, "rules_satisfied": 2.85, "success_rate": 0.109,
        "per_rule_pass_rate": [1.0, 0.55, 0.58, 0.45, 0.16, 0.11]}
FINAL = {"reward": 15.04, "rules_satisfied": 5.77, "success_rate": 0.828,
         "per_rule_pass_rate": [1.0, 0.96, 0.99, 0.91, 0.69, 0.84]}
REFS = {"solver": {"label": "solver (all rules)", "reward": 14.93, "rules_satisfied": 6.0,
                   "success_rate": 1.0, "per_rule_pass_rate": [1.0] * 6},
        "random": {"label": "random strings (floor)", "reward": 3.61, "rules_satisfied": 3.66,
                   "success_rate": 0.0, "per_rule_pass_rate": [1.0, 0.9, 0.8, 0.9, 0.05, 0.0]}}


def history(n, **extra):
    return [{"kind": "epoch", "epoch": e, "rollout/reward": 4.0 + e,
             "rollout/rules_satisfied": 3.0 + e / 4, "rollout/success_rate": e / 10,
             "adv/kl_ref": -0.01 * e, "adv/kl_ref_k3": 0.02 * e, "update/entropy": 1.5 - 0.1 * e,
             **extra} for e in range(n)]


def figures(tmp_path, *args, **kwargs):
    paths = save_figures(tmp_path, *args, **kwargs)
    return {p.stem: read_figure_description(p) for p in paths}


def series(panel, kind=None, label=None):
    return [s for s in panel["series"] if (kind is None or s["kind"] == kind)
            and (label is None or label in s["label"])]


def test_training_curves_show_what_each_line_is(tmp_path):
    figs = figures(tmp_path, history(5), BASE, FINAL, references=REFS, best_epoch=2)
    assert set(figs) == {"training_curves", "success_rate", "rule_pass_rates"}
    curves = figs["training_curves"]
    assert "held-out" in curves["title"] and "training" in curves["title"]
    reward, rules, kl, entropy = curves["panels"]
    assert [p["ylabel"] for p in curves["panels"]] == [
        "reward per game", "rules satisfied per game", "nats per token", "nats per token"]
    assert "reward" in reward["title"].lower() and "rules" in rules["title"].lower()
    assert entropy["xlabel"] == "epoch"
    # training games: one point per epoch, x counted from 1
    (train,) = series(reward, "line", "training games")
    assert train["x"] == [1, 2, 3, 4, 5] and train["y"] == [4.0, 5.0, 6.0, 7.0, 8.0]
    # held-out games: before PPO at 0, after the last epoch at 5, values in the legend
    (held,) = series(rules, "points", "held-out games")
    assert held["x"] == [0, 5] and held["y"] == [2.85, 5.77]
    assert "2.85 before PPO" in held["label"] and "5.77 after" in held["label"]
    # the reference agents as flat lines, named by what they are
    assert {(s["label"], s["y"]) for s in series(reward, "hline")} == {
        ("solver (all rules), held-out: 14.93", 14.93),
        ("random strings (floor), held-out: 3.61", 3.61)}
    # the best epoch (0-based 2 in metrics.jsonl = the third epoch) on every panel
    for panel in curves["panels"]:
        (best,) = series(panel, "vline")
        assert best["x"] == 3 and "best epoch: 3" in best["label"]
        assert panel["legend"]["outside_axes"]  # legends never cover data
    # KL: the k3 estimate (never negative), entropy: update/entropy
    (kl_line,) = series(kl, "line")
    assert kl_line["y"] == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])
    assert "k3" in kl["title"] and "never negative" in kl_line["label"]
    assert series(entropy, "line")[0]["y"] == pytest.approx([1.5, 1.4, 1.3, 1.2, 1.1])


def test_rule_pass_rates_name_the_rules_from_1(tmp_path):
    (panel,) = figures(tmp_path, history(3), BASE, FINAL, references=REFS)[
        "rule_pass_rates"]["panels"]
    assert panel["xticklabels"] == ["1. 5+ characters", "2. a number", "3. uppercase letter",
                                    "4. special character", "5. digits sum to 25", "6. a month"]
    bars = {s["label"]: s["y"] for s in series(panel, "bars")}
    assert bars == {"held-out, before PPO": BASE["per_rule_pass_rate"],
                    "held-out, after PPO": FINAL["per_rule_pass_rate"]}
    (floor,) = series(panel, "segments", "random strings (floor)")
    assert floor["y"] == REFS["random"]["per_rule_pass_rate"]
    assert floor["x"] == pytest.approx(list(range(6)))  # across each rule's group of bars
    assert panel["ylabel"] and panel["legend"]["outside_axes"]


def test_two_epochs_have_whole_epoch_ticks(tmp_path):
    for fig in figures(tmp_path, history(2), BASE, FINAL).values():
        for panel in fig["panels"]:
            if panel["xlabel"] == "epoch" or panel["series"][0]["kind"] == "line":
                assert panel["xticks"] and all(t == int(t) for t in panel["xticks"]), panel


def test_equal_results_stay_visible(tmp_path):
    """Equal baseline and final are points at different epochs; equal references share one
    line and one legend entry instead of hiding each other."""
    refs = {"solver": {"label": "a solver", "success_rate": 0.0},
            "random": {"label": "random moves", "success_rate": 0.0}}
    (panel,) = figures(tmp_path, history(2), BASE, dict(BASE), references=refs)[
        "success_rate"]["panels"]
    (held,) = series(panel, "points")
    assert held["x"] == [0, 2] and held["y"] == [0.109, 0.109]
    assert "10.9% before PPO → 10.9% after" in held["label"]
    (line,) = series(panel, "hline")
    assert line["label"] == "a solver = random moves, held-out: 0.0%"


def test_existing_calls_and_runs_without_evaluations(tmp_path):
    """The trainer's call (no references, no best epoch) still works, and the baseline and
    final evaluations come from metrics.jsonl's eval rows when not given."""
    rows = history(3) + [{"kind": "eval", "epoch": -1, "name": "baseline", "reward": 1.0},
                         {"kind": "eval", "epoch": 3, "name": "final", "reward": 2.0}]
    figs = figures(tmp_path, rows, None, None, headline="rules_satisfied")
    assert set(figs) == {"training_curves", "success_rate"}
    reward = figs["training_curves"]["panels"][0]
    assert series(reward, "points")[0]["y"] == [1.0, 2.0]
    assert not series(reward, "hline") and not series(reward, "vline")


def test_mid_training_evaluations_join_the_heldout_points(tmp_path):
    rows = history(4)
    rows[1]["eval/reward"] = 6.5  # eval_every=2: after the second epoch
    reward = figures(tmp_path, rows, BASE, FINAL)["training_curves"]["panels"][0]
    (held,) = series(reward, "points")
    assert held["x"] == [0, 2, 4] and held["y"] == [4.21, 6.5, 15.04]


def test_old_runs_without_k3_plot_k1_and_say_it_can_be_negative(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "adv/kl_ref_k3"} for r in history(3)]
    kl = figures(tmp_path, rows, BASE, FINAL)["training_curves"]["panels"][2]
    assert "k1" in kl["title"] and "can be negative" in series(kl, "line")[0]["label"]


@pytest.mark.parametrize("headline,base,final,refs,title", [
    ("best_greens", {"reward": -0.51, "success_rate": 0.0, "best_greens": 0.17},
     {"reward": -0.34, "success_rate": 0.0, "best_greens": 0.41},
     {"solver": {"label": "entropy solver (wins every game)", "best_greens": 5.0,
                 "success_rate": 1.0, "reward": 1.5}}, "greens in the best guess"),
    ("win_rate", {"reward": -1.84, "success_rate": 0.44, "win_rate": 0.44},
     {"reward": -1.46, "success_rate": 0.44, "win_rate": 0.44},
     {"random": {"label": "random legal moves", "win_rate": 0.39, "success_rate": 0.39,
                 "reward": -0.06}}, "games won"),
])
def test_other_games(tmp_path, headline, base, final, refs, title):
    rows = history(3, **{f"rollout/{headline}": 0.3})
    figs = figures(tmp_path, rows, base, final, headline=headline, references=refs,
                   best_epoch=1)
    assert set(figs) == {"training_curves", "success_rate"}  # no per-rule figure
    panel = figs["training_curves"]["panels"][1]
    assert title in panel["title"].lower()
    (held,) = series(panel, "points")
    assert held["y"] == [base[headline], final[headline]]
    (ref,) = series(panel, "hline")
    assert ref["label"].startswith(next(iter(refs.values()))["label"])


def test_description_is_png_text_metadata(tmp_path):
    from PIL import Image

    path = save_figures(tmp_path, history(2), BASE, FINAL)[0]
    with Image.open(path) as image:
        assert FIGURE_METADATA_KEY in image.text


def test_an_evaluation_of_best_sits_at_the_best_epoch(tmp_path):
    """The notebook evaluates best/ (here the third of five epochs): its held-out point is drawn
    at epoch 3, and the legend says which model it is; the Trainer's final evaluation (the last
    epoch's policy) stays at the last epoch."""
    for from_best, x, says in ((True, 3, "5.77 after (best/, epoch 3)"), (False, 5, "5.77 after")):
        figs = figures(tmp_path, history(5), BASE, FINAL, references=REFS, best_epoch=2,
                       final_from_best=from_best)
        (held,) = series(figs["training_curves"]["panels"][1], "points", "held-out games")
        assert held["x"] == [0, x] and says in held["label"]
        assert ("best/" in held["label"]) is from_best


@pytest.mark.parametrize("task, says", [
    ("password_game", "the last password holds every rule"),
    ("wordle", "the word found"),
    (None, "Password Game: every rule holds; Wordle: word found")])
def test_the_success_panel_says_what_success_is_in_this_game(tmp_path, task, says):
    figs = figures(tmp_path, history(3), BASE, FINAL, references=REFS, task=task)
    (panel,) = figs["success_rate"]["panels"]
    assert says in panel["title"]
    if task is not None:
        assert "OpenSpiel" not in panel["title"]
