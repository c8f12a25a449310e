"""What each feedback rule passes its job, as the protocol module decides it
(``FeedbackConfig.stage_fields`` and ``stage_roles``, asked by rules/common.smk's ``fb_*``
helpers): what a job receives decides what it computes and what re-runs it."""

from __future__ import annotations

import pytest

from mnemoflow.protocols import feedback as fb

JUDGE = {"base_url": "http://judge/v1", "model": "judge-model"}
CRITIC = {"base_url": "http://critic/v1", "model": "WritingBench-Critic-Model-Qwen-7B"}
SPEC = {"loader": "memorybench", "feedback": {}}


def bindings(models_config, stage, protocol="", step=0):
    """rules/common.smk's fb_models: the bindings of the roles the stage calls."""
    bound = tuple(role for role, spec in models_config.items() if spec)
    roles = fb.stage_roles(SPEC, stage, protocol, step, bound)
    return {role: models_config.get(role, {}) for role in roles}


@pytest.mark.parametrize(("protocol", "step"), [("off_policy", 0), ("on_policy", 2)])
def test_scoring_steps_receive_the_critic_binding_when_one_is_given(protocol, step):
    # WritingBench is scored by the critic role; a job without its binding silently scored with
    # the judge's instead of the configured critic model
    models = {"judge": JUDGE, "critic": CRITIC}
    assert bindings(models, "step", protocol, step)["critic"] == CRITIC
    assert bindings(models, "train_performance")["critic"] == CRITIC


def test_an_unbound_critic_is_left_out_so_it_falls_back_to_the_judge():
    # models("critic") would give {} -> an offline critic, not the judge's binding
    assert "critic" not in bindings({"judge": JUDGE}, "step", "off_policy", 0)
    assert "critic" not in bindings({"judge": JUDGE}, "train_performance")


def test_stepwise_steps_after_begin_receive_train_items_and_batch_size():
    spec = {"feedback": {"train_items": 600, "batch_size": 100, "seed": 42}}
    assert fb.stage_settings(spec, "step", "stepwise_off_policy", 1) == {
        "seed": 42,
        "batch_size": 100,
        "train_items": 600,
    }
    assert fb.stage_settings(spec, "step", "stepwise_off_policy", 0) == {"seed": 42}


def test_only_live_steps_bind_the_simulated_user_and_release_dialogues_bind_nothing():
    assert "user" in bindings({}, "step", "on_policy", 1)
    assert "user" not in bindings({}, "step", "on_policy", 0)
    assert "user" not in bindings({}, "step", "stepwise_off_policy", 1)
    release = {**SPEC, "feedback": {"dialogues": "data"}}
    assert fb.stage_roles(release, "train_dialogues") == ()
