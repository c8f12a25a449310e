"""The feedback rules' param helpers (rules/feedback_common.smk, plain Python) on their own: what
each job receives decides what it computes and what re-runs it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

RULES = Path(__file__).resolve().parents[1] / "rules" / "feedback_common.smk"
JUDGE = {"base_url": "http://judge/v1", "model": "judge-model"}
CRITIC = {"base_url": "http://critic/v1", "model": "WritingBench-Critic-Model-Qwen-7B"}


def helpers(models_config, feedback=None):
    config = {"models": models_config}
    namespace = {
        "config": config,
        # rules/common.smk's models(): the bindings of the roles a job uses
        "models": lambda *roles: {role: config["models"].get(role, {}) for role in roles},
        "benchmark_spec": lambda wildcards: {"loader": "memorybench", "feedback": feedback or {}},
    }
    exec(compile(RULES.read_text(encoding="utf-8"), str(RULES), "exec"), namespace)
    return namespace


def wildcards(protocol, step):
    return SimpleNamespace(benchmark="mb", system="bm25_message", protocol=protocol, step=str(step))


@pytest.mark.parametrize(("protocol", "step"), [("off_policy", 0), ("on_policy", 2)])
def test_scoring_steps_receive_the_critic_binding_when_one_is_given(protocol, step):
    # WritingBench is scored by the critic role; a job without its binding silently scored with
    # the judge's instead of the configured critic model
    bound = helpers({"judge": JUDGE, "critic": CRITIC})
    assert bound["fb_step_models"](wildcards(protocol, step))["critic"] == CRITIC
    assert bound["fb_scoring_models"]()["critic"] == CRITIC


def test_an_unbound_critic_is_left_out_so_it_falls_back_to_the_judge():
    # models("critic") would give {} -> an offline critic, not the judge's binding
    bound = helpers({"judge": JUDGE})
    assert "critic" not in bound["fb_step_models"](wildcards("off_policy", 0))
    assert "critic" not in bound["fb_scoring_models"]()


def test_stepwise_steps_after_begin_receive_train_items_and_batch_size():
    bound = helpers({}, {"train_items": 600, "batch_size": 100, "seed": 42})
    assert bound["fb_step_settings"](wildcards("stepwise_off_policy", 1)) == {
        "seed": 42,
        "batch_size": 100,
        "train_items": 600,
    }
    assert bound["fb_step_settings"](wildcards("stepwise_off_policy", 0)) == {"seed": 42}
