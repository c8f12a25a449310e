"""The names the config schema accepts come from their owners in the package (the judge registry,
the scorings, the feedback protocols), and each feedback setting is defined once."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from mnemoflow.config_schema import check_config, load_schema, owned_enums
from mnemoflow.errors import ConfigError
from mnemoflow.eval.benchmark_metric import JUDGES, SCORINGS
from mnemoflow.eval.static_qa.judges import GENERIC_JUDGE
from mnemoflow.protocols import feedback as fb
from mnemoflow.registry import Entry
from tests.workflow import REPO

SCHEMA = REPO / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))


def with_benchmark(config, **keys):
    name, spec = next(iter(config["benchmarks"].items()))
    return {**config, "benchmarks": {name: {**spec, **keys}}}, name


def refused(config) -> str:
    with pytest.raises(ConfigError) as caught:
        check_config(config, SCHEMA)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_newly_registered_judge_is_accepted_and_an_unknown_one_refused(config, monkeypatch):
    JUDGES.names()  # the built-in judges first, as any lookup does
    monkeypatch.setitem(JUDGES.entries, "throwaway", Entry(GENERIC_JUDGE, {}))
    check_config(with_benchmark(config, judge="throwaway")[0], SCHEMA)
    bad, name = with_benchmark(config, judge="nosuch")
    message = refused(bad)
    assert message.startswith(f"config benchmarks.{name}.judge: 'nosuch' is not one of [")
    assert "'throwaway'" in message and "'generic'" in message
    panel = [
        {"name": "a", "kind": "throwaway", "model": {"backend": "offline"}},
        {"name": "b", "kind": "generic", "model": {"backend": "offline"}},
    ]
    check_config({**config, "judge": {"panel": panel}}, SCHEMA)
    panel[0]["kind"] = "nosuch"
    assert refused({**config, "judge": {"panel": panel}}).startswith(
        "config judge.panel.0.kind: 'nosuch' is not one of ["
    )


def test_the_schema_file_names_no_owned_choice_and_the_loaded_schema_has_the_owners():
    raw = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    loaded = load_schema(SCHEMA)
    expected = {
        "judge": JUDGES.names(),
        "kind": JUDGES.names(),
        "scoring": list(SCORINGS),
        "dialogues": list(fb.DIALOGUE_SOURCES),
    }
    assert {where[-1]: names for where, names in owned_enums().items()} == expected
    for where, names in owned_enums().items():
        node, file_node = loaded, raw
        for key in where:
            node, file_node = node[key], file_node[key]
        assert node["enum"] == names
        assert "enum" not in file_node, where  # one owner: the YAML lists none of them


def test_scoring_and_dialogues_are_refused_in_one_line_with_the_owners_names(config):
    bad, name = with_benchmark(config, scoring="nosuch")
    assert refused(bad) == (
        f"config benchmarks.{name}.scoring: 'nosuch' is not one of {list(SCORINGS)}"
    )
    bad, name = with_benchmark(config, feedback={"dialogues": "nosuch"})
    assert refused(bad) == (
        f"config benchmarks.{name}.feedback.dialogues: 'nosuch' is not one of "
        f"{list(fb.DIALOGUE_SOURCES)}"
    )


def test_each_feedback_setting_is_defined_once(config):
    """The schema's ``feedback:`` keys are FeedbackConfig's fields; the moved structured_output
    key is refused with the feedback protocols' one text by both the schema check and the
    protocols; a bad value is refused by both."""
    loaded = load_schema(SCHEMA)
    block = loaded
    for key in (*("properties", "benchmarks", "additionalProperties", "properties"), "feedback"):
        block = block[key]
    assert block["additionalProperties"] is False
    assert set(block["properties"]) == {f.name for f in dataclasses.fields(fb.FeedbackConfig)}
    bad, name = with_benchmark(config, feedback={"structured_output": "on"})
    assert refused(bad) == fb.MOVED_STRUCTURED_OUTPUT.replace("<name>", name)
    with pytest.raises(ConfigError, match=re.escape(fb.MOVED_STRUCTURED_OUTPUT)):
        fb.FeedbackConfig.from_spec({"feedback": {"structured_output": "on"}})
    for setting, value in (("dialogues", "nosuch"), ("batch_size", 0), ("max_rounds", 0)):
        assert refused(with_benchmark(config, feedback={setting: value})[0])
        with pytest.raises(ConfigError, match=f"feedback.{setting}"):
            fb.FeedbackConfig.from_spec({"feedback": {setting: value}})
