"""configs/reference/amemgym-released.yaml: the AMemGym reference's settings for released data,
written in one place.

It is read as the workflow reads it (deep-merged over config.yaml, checked by the config schema)
and asked through the functions the rules ask (``schedule_of``, ``reference_upper_bound``): the
options keep the file's order and the upper bound is the reference's lookup. A dry run plans a
released-format environment with it, and no other config or doc restates the two settings.
"""

from __future__ import annotations

import re

import pytest
import yaml
from snakemake.utils import update_config

from mnemoflow.config_schema import check_config
from mnemoflow.data.amemgym import load
from mnemoflow.environment.knobs import V1_BASE
from mnemoflow.protocols.interactive import reference_upper_bound, schedule_of
from tests.amemgym_fixtures import environment, write_environment
from tests.workflow import REPO, TINY, planned_outputs, snakemake, workdir

RELEASED = REPO / "configs" / "reference" / "amemgym-released.yaml"
NAME = "amemgym_v1"


def merged(*layers: dict) -> dict:
    """config.yaml with ``layers`` deep-merged on top, as Snakemake merges --configfile files."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    for layer in layers:
        update_config(config, layer)
    return config


def released() -> dict:
    return yaml.safe_load(RELEASED.read_text())


def test_the_file_holds_the_references_settings_and_passes_the_schema():
    config = merged(released())
    check_config(config, REPO / "schemas" / "config.schema.yaml")
    spec = config["benchmarks"][NAME]
    assert spec["loader"] == "amemgym" and config["run"]["benchmarks"] == [NAME]
    schedule = schedule_of(spec)
    assert schedule["shuffle_options"] is False  # the file's order, as the reference shows it
    assert reference_upper_bound(spec) is True  # the reference's state-tuple lookup
    # v1.base's rounds per session, the same as the generation preset's
    rounds = (schedule["num_rounds_init"], schedule["num_rounds_update"])
    assert rounds == (V1_BASE["num_rounds_init"], V1_BASE["num_rounds_update"])


def test_a_layer_on_top_adds_what_it_leaves_open_and_keeps_the_settings(tmp_path):
    path = write_environment(tmp_path)
    config = merged(released(), {"benchmarks": {NAME: {"source": {"path": str(path)}}}})
    spec = config["benchmarks"][NAME]
    assert spec["source"] == {"path": str(path)}
    assert schedule_of(spec)["shuffle_options"] is False and reference_upper_bound(spec)
    # the loader shows every question's options in data.json's order
    questions = load(spec).questions
    choices = {
        q: [c["answer"] for c in qa["answer_choices"]]
        for q, qa in enumerate(environment()[0]["qas"])
    }
    for row in questions[questions.episode_id == "ana"].itertuples():
        index = int(re.search(r"_q(\d+)$", row.question_id).group(1))
        assert list(row.options) == choices[index]


@pytest.mark.slow
def test_a_dry_run_plans_a_released_format_environment_with_it(tmp_path):
    wd = workdir(tmp_path)
    write_environment(wd)
    layer = wd / "endpoints.yaml"
    layer.write_text(
        yaml.safe_dump(
            {
                "models": {"embedder": {"backend": "offline"}},
                "benchmarks": {NAME: {"source": {"path": "data.json"}, "systems": ["native"]}},
            }
        )
    )
    log = snakemake(wd, "--dry-run", configfiles=(TINY, RELEASED, layer))
    planned = planned_outputs(log)
    assert f"results/{NAME}/upper_bound.parquet" in planned
    for protocol in ("interactive", "interactive_replay"):
        for step in (0, 1, 2):  # the fixture's periods 0-2
            assert f"results/{NAME}/native/{protocol}/step{step}/scores.parquet" in planned


def test_no_other_config_or_doc_restates_the_settings():
    """One place, not two: elsewhere the settings are named by pointing at the file."""
    restated = re.compile(r"reference_upper_bound:\s*true|shuffle_options:\s*false")
    others = [
        p
        for p in [*REPO.glob("configs/**/*.yaml"), *REPO.glob("docs/*.md"), REPO / "README.md"]
        if p != RELEASED and restated.search(p.read_text())
    ]
    assert not others
    for doc in ("docs/amemgym.md", "docs/interactive.md"):
        assert "configs/reference/amemgym-released.yaml" in (REPO / doc).read_text(), doc
