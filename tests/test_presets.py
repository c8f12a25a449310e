"""The paper presets (configs/paper/, issue 21 item 1): one config per published experiment.

Every preset, layered as docs/reproduce.md says (an AMemGym preset on top of
configs/reference/amemgym-released.yaml, the site file last), passes the config schema, binds every
role by endpoint NAME to what configs/site.example.yaml defines, labels its systems with the rows
the paper prints, and dry-runs on stand-in data (tests/paper_standins.py) with the real site file.
Some presets run fully on stand-in data with every endpoint bound to the offline model
(configs/site.offline.yaml), and their summary.md, report.html and ``mnemoflow compare --preset``
set the published numbers beside ours (AMemGym's memory agents, LoCoMo, LongMemEval, MemoryBench
off-policy), or list ours with the reason none is published (AMemGym's self-evolution).
``compare --preset`` prints its section for all nine presets on a stand-in summary of each.
"""

from __future__ import annotations

import html
import json
import os
import re

import pandas as pd
import pytest
import yaml

from mnemoflow.cli import main as cli
from mnemoflow.commands.compare import read_preset
from mnemoflow.config_schema import check_config
from mnemoflow.data.published import load_published, select_published
from mnemoflow.data.tables import SUMMARY, empty, write_table
from mnemoflow.errors import ConfigError
from mnemoflow.jobs.summary import ReportFiles
from mnemoflow.jobs.summary import report as report_job
from mnemoflow.llm.endpoints import bind_endpoints
from mnemoflow.llm.types import ROLES, check_bindings
from mnemoflow.memory.base import check_systems
from mnemoflow.report.reproduction import Request, published_section, request_of
from tests.paper_standins import (
    OFFLINE,
    PRESETS,
    SITE,
    layers,
    merged,
    missing_data_error,
    place_standins,
    snakemake_in_process,
    standin_override,
    write_standins,
)
from tests.workflow import REPO, workdir

SCHEMA = REPO / "schemas" / "config.schema.yaml"
NAMES = [
    "amemgym-evolution",
    "amemgym-memory-agents",
    "amemgym-on-vs-off",
    "amemgym-v1base-native",
    "locomo",
    "longmemeval-s",
    "memorybench-off-policy",
    "memorybench-on-policy",
    "memorybench-stepwise",
]
#: Systems a preset runs beside the paper's rows, on purpose (the file's comment says why).
NOT_PAPER_ROWS = {
    ("locomo", "bm25_message"),
    # LongMemEval's retrieval tables are on M with Stella V5 / Contriever: these stand in on S
    *(
        ("longmemeval-s", s)
        for s in ("bm25_session", "dense_session", "bm25_message", "dense_message")
    ),
}
KEYS = {"OPENAI_API_KEY": "sk-test", "DEEPSEEK_API_KEY": "sk-test"}


def preset(name: str) -> dict:
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text(encoding="utf-8"))


def test_the_presets_are_the_published_experiments():
    assert sorted(p.stem for p in PRESETS.glob("*.yaml")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_preset_validates_and_binds_every_role_by_endpoint_name(name):
    own = preset(name)
    assert "endpoints" not in own  # where a NAME answers is the site file's business
    for role, spec in own["models"].items():
        assert "endpoint" in spec and "base_url" not in spec, role
    site = yaml.safe_load(SITE.read_text())["endpoints"]
    assert {spec["endpoint"] for spec in own["models"].values()} <= set(site)
    config = merged(*layers(PRESETS / f"{name}.yaml"), SITE)
    check_config(config, SCHEMA)  # the workflow's own check
    check_systems(config["systems"])
    models = bind_endpoints(config["models"], config.get("endpoints"))
    check_bindings(models, KEYS, used=ROLES, allow_offline=ROLES)
    for role in own["models"]:
        assert models[role]["backend"] == "openai" and models[role]["base_url"], role
    # the offline site file binds the same names to the embedded model
    offline = merged(*layers(PRESETS / f"{name}.yaml"), OFFLINE)
    bound = bind_endpoints(offline["models"], offline["endpoints"])
    assert {bound[role]["backend"] for role in own["models"]} == {"offline"}


@pytest.mark.parametrize("name", NAMES)
def test_every_system_is_labelled_with_the_papers_row(name):
    own = preset(name)
    config = merged(*layers(PRESETS / f"{name}.yaml"))
    ran = set(config["run"]["systems"])
    for bench in config["run"]["benchmarks"]:
        ran |= set(config["benchmarks"][bench].get("systems", ()))
    for system, spec in own["systems"].items():
        assert system in ran, f"{name}: {system} is defined but never run"
        if (name, system) not in NOT_PAPER_ROWS:
            assert spec.get("published_as"), f"{name}: {system} has no published_as"


@pytest.mark.parametrize("name", NAMES)
def test_a_preset_reads_its_own_pinned_data_not_a_default_runs(name):
    """Config files merge key by key: a preset benchmark named like one of config.yaml's would
    inherit that entry's local source (and its checksum) instead of the preset's pinned one."""
    config = merged(*layers(PRESETS / f"{name}.yaml"))
    defaults = merged()["benchmarks"]
    for bench in config["run"]["benchmarks"]:
        spec = config["benchmarks"][bench]
        assert "source" not in defaults.get(bench, {}), f"{name}: {bench}"
        assert spec.get("download") or spec.get("source"), f"{name}: {bench} names no data"


def test_labels_name_rows_of_the_tables_a_preset_compares_with():
    published = load_published()
    for name in NAMES:
        compare = preset(name)["compare"]
        if not compare.get("published"):
            assert compare.get("missing"), name  # says what is not shipped
            continue
        rows = set(select_published(published, compare["published"])["row"])
        systems = preset(name)["systems"].values()
        labels = {spec["published_as"] for spec in systems if "published_as" in spec}
        assert labels <= rows, f"{name}: {sorted(labels - rows)} are not rows of its tables"


def test_an_amemgym_preset_without_the_reference_file_says_which_file_goes_first():
    config = merged(PRESETS / "amemgym-memory-agents.yaml", SITE)
    with pytest.raises(ConfigError, match=r"^config benchmarks.amemgym_v1.loader: missing; .*"
                       r"configs/reference/amemgym-released.yaml first"):  # fmt: skip
        check_config(config, SCHEMA)


def test_compare_reads_every_preset_or_what_it_would_compare_with():
    preset = read_preset("amemgym-memory-agents", PRESETS)
    assert preset.published == "amemgym/memory_agents" and preset.benchmark == "amemgym_v1"
    assert dict(preset.unpaired) == {
        "A-Mem": "the a-mem product is not adapted (notes_linked is only A-Mem-style)",
        "Nemori": "no mnemoflow adapter",
    }
    assert ("awe_2_4_30", "AWE-(2,4,30)") in preset.pairs
    assert ("mem0_graph_2_30", "Mem0-G") in preset.pairs
    preset = read_preset("locomo", PRESETS)
    assert preset.published == "locomo/qa_f1.by-row,locomo/rag_qa.gpt-3.5-turbo"
    assert preset.benchmark is None
    assert ("dense_5", "Dialog top-5") in preset.pairs
    assert ("long_context", "gpt-3.5-turbo 16K") in preset.pairs
    assert "not a mnemoflow system" in dict(preset.unpaired)["Observation top-5"]
    evolution = read_preset("amemgym-evolution", PRESETS)
    assert (
        evolution.published is None
        and "Table 3 of arXiv 2603.01966v1" in (evolution.compare["missing"])
    )
    assert evolution.compare["table"] == "self_evolution.gpt-4.1-mini"
    stepwise = read_preset("memorybench-stepwise", PRESETS).compare
    assert stepwise["plotted"]["mb_legal"] == {
        "figure": "Figure 10",
        "rows": {"BM25-S": "(a)", "Embed-S": "(b)"},
    }
    on_policy = read_preset("memorybench-on-policy", PRESETS).compare
    assert list(on_policy["plotted"]["mb_legal"]["rows"]) == ["BM25-S", "Embed-S", "A-Mem", "Mem0"]
    preset = read_preset("longmemeval-s", PRESETS)
    assert preset.published == "longmemeval/fig3b_s_con.by-row"
    assert preset.benchmark == "longmemeval_s_long_context"
    assert preset.pairs == [("long_context", "GPT-4o")]  # the retrievers on S have no published row


def test_a_preset_without_numbers_must_say_what_it_would_compare_with(tmp_path):
    (tmp_path / "bare.yaml").write_text("compare: {published: null, missing: not shipped}\n")
    with pytest.raises(ConfigError, match=r"bare.yaml: compare.paper: a text is needed"):
        read_preset("bare", tmp_path)
    (tmp_path / "odd.yaml").write_text(
        "compare: {published: null, paper: p, table: t, missing: m, metrics: [f1],"
        " plotted: {b: {figure: Figure 1}}}\n"
    )
    with pytest.raises(ConfigError, match=r"odd.yaml: compare.plotted.b: expected"):
        read_preset("odd", tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_a_preset_accounts_for_every_row_of_its_tables(name):
    """Each row of the tables it names (or the rows its figures plot) is either one of its
    systems (published_as) or listed with the reason it has no counterpart (compare.unpaired),
    never both: no paper row goes without a reason."""
    own = preset(name)
    compare = own["compare"]
    if compare["published"]:
        rows = set(select_published(load_published(), compare["published"])["row"])
    else:
        rows = {row for fig in compare.get("plotted", {}).values() for row in fig["rows"]}
    labels = {spec["published_as"] for spec in own["systems"].values() if "published_as" in spec}
    unpaired = set(compare.get("unpaired", ()))
    assert rows <= labels | unpaired and not labels & unpaired, sorted(rows - labels - unpaired)


def test_an_offline_endpoint_binds_its_roles_to_the_offline_model():
    models = {
        "agent": {"endpoint": "gpu", "model": "Qwen/Qwen3-8B", "temperature": 0.1,
                  "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
        "embedder": {"backend": "openai", "endpoint": "gpu", "model": "e"},
    }  # fmt: skip
    bound = bind_endpoints(models, {"gpu": {"backend": "offline"}})
    # the endpoint's name stays, so the plan and summary.md say "offline (endpoint gpu; ...)"
    assert bound["agent"] == {"temperature": 0.1, "backend": "offline", "endpoint": "gpu"}
    assert bound["embedder"] == {"backend": "offline", "endpoint": "gpu"}
    with pytest.raises(ConfigError, match=r"^config endpoints.gpu.backend: only offline"):
        bind_endpoints(models, {"gpu": {"backend": "openai"}})


def test_the_comparison_a_config_asks_for():
    config = merged(*layers(PRESETS / "amemgym-memory-agents.yaml"))
    request = request_of(config)
    assert request.published == "amemgym/memory_agents" and request.benchmark == "amemgym_v1"
    assert ("rag_2_4_30", "RAG-(2,4,30)") in request.pairs and request.shipped
    assert Request.from_params(request.as_params()) == request
    missing = request_of(merged(PRESETS / "amemgym-evolution.yaml"))
    assert not missing.shipped and "self-evolution table" in missing.missing
    locomo = request_of(merged(PRESETS / "locomo.yaml"))
    assert locomo.shipped and ("dense_50", "Dialog top-50") in locomo.pairs
    assert dict(locomo.unpaired)["Human"] == "human answers, not a system"
    assert Request.from_params(locomo.as_params()) == locomo
    assert request_of(merged()) is None  # the default run compares with nothing
    # labels alone: the rows of those labels (which benchmark they are: the loader decides)
    config = merged(PRESETS / "amemgym-on-vs-off.yaml")
    del config["compare"]
    config["systems"] = {"awe_2_4_30": {"type": "agentic_external", "published_as": "AWE-(2,4,30)"}}
    request = request_of(config)
    assert request.published is None and request.pairs == (("awe_2_4_30", "AWE-(2,4,30)"),)


def test_a_preset_system_left_out_of_the_run_is_the_reason_in_summary_md_too():
    """A run of part of a preset: summary.md's rows of the left-out systems say so, as
    ``compare --preset`` does (not "not paired")."""
    config = merged(*layers(PRESETS / "amemgym-memory-agents.yaml"))
    config["benchmarks"]["amemgym_v1"]["systems"] = ["native", "awe_2_4_30"]
    request = Request.from_params(request_of(config).as_params())
    assert ("awe_2_4_30", "AWE-(2,4,30)") in request.pairs
    reasons = dict(request.unpaired)
    assert reasons["AWI"] == "its counterpart awi is not in the run"
    assert reasons["Nemori"] == "no mnemoflow adapter"  # the preset's own reason stays


def test_a_config_without_published_numbers_is_checked_when_the_workflow_starts():
    """The workflow reads the same ``compare:`` as ``compare --preset``: a field its section
    needs is missing at start, one line naming it, never a KeyError in the summary job."""
    compare = {"published": None, "metrics": ["memory_score"], "missing": "no table",
               "paper": "amemgym"}  # fmt: skip
    with pytest.raises(ConfigError, match=r"^config: compare\.table: a text is needed"):
        request_of({"compare": compare})
    compare["table"] = "self_evolution"
    compare["plotted"] = {"amemgym_v1": {"figure": "Figure 3"}}
    with pytest.raises(ConfigError, match=r"^config: compare\.plotted\.amemgym_v1: expected"):
        request_of({"compare": compare})
    del compare["plotted"]
    assert request_of({"compare": compare}).unpublished == compare
    # published null without metrics: the section only says what is not shipped
    assert request_of({"compare": {"published": None, "missing": "x"}}).unpublished is None


# --- on stand-in data ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    return write_standins(tmp_path_factory.mktemp("standins"))


def _layered(tmp, name, standins, site, *extra):
    override = tmp / f"{name}.standin.json"
    override.write_text(
        json.dumps(standin_override(merged(*layers(PRESETS / f"{name}.yaml")), standins))
    )
    return [*layers(PRESETS / f"{name}.yaml"), site, override, *extra]


@pytest.fixture()
def fresh_clone(tmp_path, monkeypatch):
    """Offline, an empty data cache, no key variable: a fresh clone on a machine that has only
    the files a user placed."""
    monkeypatch.setenv("MNEMOFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    return tmp_path


@pytest.mark.parametrize("name", NAMES)
def test_a_presets_missing_data_is_named_in_one_line_and_placing_it_there_is_enough(
    name, standins, fresh_clone, monkeypatch
):
    wd = fresh_clone / "run"
    wd.mkdir()
    monkeypatch.chdir(wd)
    config = merged(*layers(PRESETS / f"{name}.yaml"), SITE)
    said = place_standins(config, standins, wd)
    for bench, message in said.items():
        assert "\n" not in message and message.startswith(f"config benchmarks.{bench}: ")
        if config["benchmarks"][bench]["loader"] == "memorybench":
            # every file, where it goes and where it comes from (pinned), never cut off
            assert message.count("sha256 ") == 4 and "THUIR/MemoryBench@" in message
            assert "MemoryBench/configs/final_evaluate_summary_wo_details.json (https" in message
        if config["benchmarks"][bench]["loader"] == "amemgym":
            assert "AGI-Eval/AMemGym's v1.base/data.json" in message
    assert said  # every preset's data is missing at first
    for bench in config["run"]["benchmarks"]:  # placed where the messages say: the check passes
        assert missing_data_error(config, bench) is None, bench


@pytest.mark.slow
def test_every_preset_dry_runs_on_stand_in_data_with_the_site_file(standins, fresh_clone):
    """With the stand-ins placed where each one-line error says and no key variable set."""
    planned = {}
    for name in NAMES:
        (fresh_clone / name).mkdir()
        wd = workdir(fresh_clone / name)
        files = [*layers(PRESETS / f"{name}.yaml"), SITE]
        cwd = os.getcwd()
        os.chdir(wd)
        try:
            place_standins(merged(*files), standins, wd)
        finally:
            os.chdir(cwd)
        planned[name] = snakemake_in_process(wd, files, dry=True)
        assert "results/report.html" in planned[name], name
    # the plans are the papers' experiments: their systems, protocols and steps
    agents = planned["amemgym-memory-agents"]
    for system in ("native", "awe_8_4_30", "mem0_graph_2_30", "none"):
        assert f"results/amemgym_v1/{system}/interactive/step1/scores.parquet" in agents
    assert not [p for p in agents if "interactive_replay" in p]
    assert (
        "results/amemgym_v1/awe_4_4_30/interactive_replay/step1/scores.parquet"
        in (planned["amemgym-on-vs-off"])
    )
    stepwise = planned["memorybench-stepwise"]
    last = 1 + -(-1181 // 100)  # Open-Domain: 1 + ceil(train_items / batch_size) steps
    assert (
        f"results/mb_open_domain/mem0_paper/stepwise_off_policy/step{last - 1}/scores.parquet"
        in stepwise
    )
    assert not [p for p in stepwise if f"step{last}/" in p and "mb_open_domain" in p]
    on_policy = planned["memorybench-on-policy"]
    assert "results/mb_short_short/dense_session/on_policy/step10/scores.parquet" in on_policy
    sets = {
        p.split("/")[1] for p in planned["memorybench-off-policy"] if p.startswith("results/mb_")
    }
    assert len(sets) == 7
    assert any("longmemeval_s_long_context/long_context/qa" in p for p in planned["longmemeval-s"])
    assert any("locomo10/dense_50/qa" in p for p in planned["locomo"])


@pytest.fixture(scope="module")
def memory_agents_run(standins, tmp_path_factory):
    """amemgym-memory-agents on the stand-in environment (2 users, periods 0-1), offline, with
    two of the paper's rows (LLM and AWE-(2,4,30))."""
    tmp = tmp_path_factory.mktemp("agents")
    systems = ["native", "awe_2_4_30"]
    scale = {"benchmarks": {"amemgym_v1": {"systems": systems, "shards": 1}}}
    return _offline_run(tmp, "amemgym-memory-agents", standins, scale)


def _offline_run(tmp, name, standins, scale: dict):
    """The working directory of an offline run of preset ``name`` on the stand-ins, with the
    ``scale`` layer (fewer systems, shards) on top."""
    (tmp / "scale.yaml").write_text(yaml.safe_dump(scale))
    (tmp / "run").mkdir()
    wd = workdir(tmp / "run")
    snakemake_in_process(wd, _layered(tmp, name, standins, OFFLINE, tmp / "scale.yaml"), dry=False)
    return wd


@pytest.mark.slow
def test_a_memory_agents_run_sets_the_published_numbers_beside_ours(memory_agents_run, capsys):
    results = memory_agents_run / "results"
    summary = pd.read_parquet(results / "summary.parquet")
    assert {"native", "awe_2_4_30"} == set(summary["system"])
    text = (results / "summary.md").read_text()
    assert "## Published vs ours" in text and "amemgym/memory_agents" in text
    row = re.search(r"^\|[^\n]*AWE-\(2,4,30\)[^\n]*\| mean \| memory_score \|[^\n]*$", text, re.M)
    assert row and "awe_2_4_30" in row.group(0)
    assert "ours: mean over periods 0-1, the paper's 0-10" in text
    html = (results / "report.html").read_text()
    assert "Published vs ours" in html and "AWE-(2,4,30)" in html
    # the same cells from the command line
    assert cli(["compare", str(results), "--preset", "amemgym-memory-agents"]) == 0
    out = capsys.readouterr().out
    assert "against the published amemgym/memory_agents" in out and "awe_2_4_30" in out
    assert re.search(
        r"^\| amemgym \| memory_agents \| Nemori \| 12 \| no mnemoflow adapter \|$", out, re.M
    )
    # preset systems this run left out are listed as such
    assert re.search(r"\| AWI \| 12 \| its counterpart awi is not in the run \|", out)
    ours = summary.set_index(["system", "protocol", "step", "metric", "aggregate"])["value"]
    value = ours[("awe_2_4_30", "interactive", 1, "memory_score", "mean_over_periods")]
    assert f"| awe_2_4_30 | interactive | mean | mean | memory_score | 0.296 | {value:.3f} |" in out


@pytest.mark.slow
def test_the_dossier_names_each_published_cells_run_and_the_papers_settings(memory_agents_run):
    dossier = json.loads((memory_agents_run / "results" / "report" / "dossier.json").read_text())
    cells = [c for c in dossier["published"] if c["row"] == "AWE-(2,4,30)"]
    paired = [c for c in cells if c["ours"] is not None]
    assert paired and {c["run"] for c in paired} == {"amemgym_v1/awe_2_4_30/interactive"}
    assert all(c["paper_settings"]["source"] and c["paper_settings"]["version"] for c in cells)
    assert all(c["run"] is None for c in dossier["published"] if not c["system"])
    data = dossier["runs"]["amemgym_v1/awe_2_4_30/interactive"]["data"]
    assert (memory_agents_run / data["environment"]["path"]).is_file()


@pytest.fixture(scope="module")
def evolution_run(standins, tmp_path_factory):
    """amemgym-evolution on the stand-in environment (2 users, periods 0-1), offline, with one
    of its three systems (question-only feedback)."""
    system = "awi_evolve_question_only"
    scale = {
        "run": {"systems": [system]},
        "benchmarks": {"amemgym_v1": {"systems": [system], "shards": 1}},
    }
    return _offline_run(tmp_path_factory.mktemp("evolution"), "amemgym-evolution", standins, scale)


@pytest.mark.slow
def test_an_evolution_run_lists_ours_with_the_reason_no_number_is_beside_it(evolution_run, capsys):
    """The paper's Table 3 is not shipped: summary.md and compare --preset list our memory score
    and accuracy (mean over periods, with the interval over users: degenerate when the offline
    model scores every user alike) with that reason."""
    results = evolution_run / "results"
    summary = pd.read_parquet(results / "summary.parquet")
    ours = summary.set_index(["system", "metric", "aggregate"])["value"]
    value = ours[("awi_evolve_question_only", "memory_score", "mean_over_periods")]
    text = (results / "summary.md").read_text()
    assert "## Published vs ours" in text
    assert "No published numbers for amemgym/self_evolution.gpt-4.1-mini" in text
    assert cli(["compare", str(results), "--preset", "amemgym-evolution"]) == 0
    out = capsys.readouterr().out
    row = re.search(r"^\| amemgym \| self_evolution\.gpt-4\.1-mini \| question only \| "
                    r"awi_evolve_question_only \| interactive \| mean \| mean_over_periods \| "
                    r"memory_score \| – \| ([-0-9.]+) \| [^\n]*\| "
                    r"(?:cluster-bootstrap|degenerate) \|[^\n]*"
                    r"Table 3 of arXiv 2603\.01966v1\) is not shipped", out, re.M)  # fmt: skip
    assert row and float(row.group(1)) == pytest.approx(value, abs=5e-4)
    assert row.group(0) in text  # summary.md: the same cells
    page = (results / "report.html").read_text().replace("<wbr>", "")  # and report.html
    assert f"<td>memory_score</td><td>{row.group(1)}</td>" in page
    assert "Table 3 of arXiv 2603.01966v1) is not shipped" in page


@pytest.fixture(scope="module")
def locomo_run(standins, tmp_path_factory):
    """locomo on the stand-in sample, offline: its retrieval benchmark with one system (the
    long-context benchmark is planned by the dry run)."""
    scale = {
        "run": {"benchmarks": ["locomo10"], "systems": ["dense_5"]},
        "benchmarks": {"locomo10": {"shards": 1}},
    }
    return _offline_run(tmp_path_factory.mktemp("locomo"), "locomo", standins, scale)


@pytest.mark.slow
def test_a_locomo_run_sets_the_acl_papers_numbers_beside_ours(locomo_run, capsys):
    """Per category and overall: our F1 of dense_5 beside the paper's Dialog top-5 (Table 3),
    the rows without a counterpart listed with their reason (long_context: not in this run)."""
    results = locomo_run / "results"
    summary = pd.read_parquet(results / "summary.parquet")
    micro = summary[summary["aggregate"] == "micro"].set_index(["benchmark", "system", "metric"])
    assert {"f1", "j", "turn_evidence_recall"} <= set(micro.loc[("locomo10", "dense_5")].index)
    ours = summary.set_index(["system", "metric", "aggregate"])["value"]
    text = (results / "summary.md").read_text()
    assert "## Published vs ours" in text and "locomo/rag_qa.gpt-3.5-turbo" in text
    row = re.search(
        r"^\|[^\n]*\| Dialog top-5 \| dense_5 \| qa \| mean \| type:single-hop \| f1 \| 0.533 \|"
        r" ([0-9.]+) \|",
        text,
        re.M,
    )
    single_hop = ours[("dense_5", "f1", "type:single-hop")]
    assert row and float(row.group(1)) == pytest.approx(single_hop, abs=5e-4)
    assert "retrieval over LLM-written observations is not a mnemoflow system" in text
    html = (results / "report.html").read_text()
    assert "Published vs ours" in html and "Dialog top-5" in html
    assert cli(["compare", str(results), "--preset", "locomo"]) == 0
    out = capsys.readouterr().out
    assert "against the published locomo/qa_f1.by-row,locomo/rag_qa.gpt-3.5-turbo" in out
    micro = ours[("dense_5", "f1", "micro")]
    overall = f"| Dialog top-5 | dense_5 | qa | mean | mean | f1 | 0.388 | {micro:.3f} |"
    assert overall in out
    unpaired = re.search(r"^\| locomo \| qa_f1.by-row \| gpt-3.5-turbo 16K \|[^\n]*$", out, re.M)
    assert unpaired and "long_context is not in the run" in unpaired.group(0)
    assert re.search(r"^\| locomo \| rag_qa.gpt-3.5-turbo \| Summary top-2 \| 12 \|", out, re.M)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["amemgym-v1base-native", "memorybench-off-policy"])
def test_mnemoflow_plan_succeeds_once_the_data_is_where_the_error_said(
    name, standins, fresh_clone, capsys
):
    """`mnemoflow plan` with the real site file, offline and with no key variable set."""
    (fresh_clone / "run").mkdir()
    wd = workdir(fresh_clone / "run")
    files = [*layers(PRESETS / f"{name}.yaml"), SITE]
    args = ["plan", "--json", "--directory", str(wd), "--configfile", *map(str, files)]
    assert cli(args) == 2  # nothing placed yet: the one-line error
    cwd = os.getcwd()
    os.chdir(wd)
    try:
        said = place_standins(merged(*files), standins, wd)
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err  # one line: every benchmark, those missing the same once
    assert "\n" not in err.strip() and all(f"benchmarks.{b}" in err for b in said)
    assert all(message.partition(": ")[2] in err for message in said.values())
    assert cli(args) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["calls"] > 0 and {run["benchmark"] for run in plan["runs"]} == set(
        merged(*files)["run"]["benchmarks"]
    )


@pytest.fixture(scope="module")
def longmemeval_run(standins, tmp_path_factory):
    """longmemeval-s on the stand-in records, offline: its long-context benchmark only."""
    scale = {
        "run": {"benchmarks": ["longmemeval_s_long_context"], "systems": ["long_context"]},
        "benchmarks": {"longmemeval_s_long_context": {"shards": 1}},
    }
    return _offline_run(tmp_path_factory.mktemp("longmemeval"), "longmemeval-s", standins, scale)


@pytest.mark.slow
def test_a_longmemeval_run_sets_figure_3b_beside_ours(longmemeval_run, capsys):
    results = longmemeval_run / "results"
    assert cli(["compare", str(results), "--preset", "longmemeval-s", "--all"]) == 0
    out = capsys.readouterr().out
    assert "against the published longmemeval/fig3b_s_con.by-row" in out
    assert "10 published cells; 1 paired with the run" in out
    row = re.search(
        r"^\| longmemeval \| fig3b_s_con.by-row \| GPT-4o \| long_context \|.*$", out, re.M
    )
    summary = pd.read_parquet(results / "summary.parquet")
    ours = summary[
        (summary["system"] == "long_context")
        & (summary["metric"] == "accuracy")
        & (summary["aggregate"] == "micro")
    ]["value"]
    assert row and f"| 0.640 | {ours.iloc[-1]:.3f} |" in row.group(0)
    # the four readers the preset does not run: their 8 cells, then each row once, with its reason
    reasons = re.findall(r"^\|[^\n]*Instruct[^\n]*another reader model", out, re.M)
    assert len(reasons) == 12 and sum("| qa | mean |" in line for line in reasons) == 8


MB_SETS = [
    "mb_open_domain", "mb_academic_knowledge", "mb_legal",
    "mb_long_short", "mb_short_long", "mb_long_long", "mb_short_short",
]  # fmt: skip


def _compare_with_the_preset(tmp_path, rows, capsys) -> str:
    """`compare --preset memorybench-off-policy --all` on a run of these summary rows."""
    write_table(pd.DataFrame(rows), tmp_path / "summary.parquet", SUMMARY)
    assert cli(["compare", str(tmp_path), "--preset", "memorybench-off-policy", "--all"]) == 0
    return capsys.readouterr().out


def test_a_memorybench_off_policy_run_is_set_against_tables_10_and_11(tmp_path, capsys):
    """A run's set summaries (aggregate "normalized", as protocols/feedback.py writes them) are
    paired with the paper's Tables 10 (weighted_average) and 11 (z_score), set by set; the paper's
    rows without a system in the run stay unpaired."""
    rows = [
        {"benchmark": bench, "system": system, "protocol": "off_policy", "step": 0,
         "metric": metric, "aggregate": "normalized", "value": value + 0.01 * i, "n": 50}
        for i, bench in enumerate(MB_SETS)
        for system, value in (("none", 0.5), ("bm25_session", 0.6))
        for metric in ("weighted_average", "z_score")
    ]  # fmt: skip
    out = _compare_with_the_preset(tmp_path, rows, capsys)
    assert "against the published memorybench/off_policy_minmax.qwen3-8b" in out
    assert "108 published cells; 28 paired with the run" in out
    legal = re.search(r"^\| memorybench \| off_policy_minmax\.qwen3-8b \| BM25-S \| bm25_session "
                      r"\| off_policy \| mean \|(?: mean \|)? weighted_average \| "
                      r"([0-9.]+) \| ([0-9.]+) \|[^\n]*\| mb_legal \|$", out, re.M)  # fmt: skip
    assert legal and float(legal.group(1)) == pytest.approx(0.4776, abs=5e-4)  # printed .3f
    assert float(legal.group(2)) == pytest.approx(0.62)  # ours on mb_legal, not another set
    assert re.search(r"^\| memorybench \| off_policy_zscore\.qwen3-8b \| A-Mem \|  \|.*not adapted",
                     out, re.M)  # fmt: skip
    # Kendall tau within each set (two paired rows each), never across sets
    taus = re.findall(r"^\| memorybench \| off_policy_minmax\.qwen3-8b \| off_policy \| "
                      r"weighted_average \| 2 \| [-0-9.]+ \| (mb_\w+) \|$", out, re.M)  # fmt: skip
    assert sorted(taus) == sorted(MB_SETS)


def test_a_run_of_one_memorybench_set_pairs_that_set_only(tmp_path, capsys):
    rows = [
        {"benchmark": "mb_legal", "system": "none", "protocol": "off_policy", "step": 0,
         "metric": metric, "aggregate": "normalized", "value": 0.5, "n": 50}
        for metric in ("weighted_average", "z_score")
    ]  # fmt: skip
    out = _compare_with_the_preset(tmp_path, rows, capsys)
    assert "108 published cells; 2 paired with the run" in out
    # each cell (Mem0 has none on Open), then one line per row and table below the cells
    assert out.count("the run has no benchmark 'mb_open_domain'") == 2 * 7 + 2 * 7
    assert out.count("the run has no benchmark 'mb_academic_knowledge'") == 2 * 8 + 2 * 8
    assert "| memorybench | off_policy_minmax.qwen3-8b | A-Mem | 1 | the a-mem product" in out


@pytest.fixture(scope="module")
def memorybench_run(standins, tmp_path_factory):
    """memorybench-off-policy on the stand-in release, offline: its Legal set with two of the
    paper's rows (Vanilla and BM25-S), normalized with statistics written here."""
    tmp = tmp_path_factory.mktemp("memorybench")
    datasets = ("Locomo", "LexEval-QA")  # the stand-in's datasets (Locomo-k merged)
    stats = {
        f"dataset_{key}": dict.fromkeys(datasets, value)
        for key, value in (("min", 0.0), ("max", 1.0), ("mu", 0.5), ("sigma", 0.25))
    }
    (tmp / "stats.json").write_text(json.dumps({"domain": {"Legal": {"summary": stats}}}))
    scale = {
        "run": {"benchmarks": ["mb_legal"], "systems": ["none", "bm25_session"]},
        "benchmarks": {"mb_legal": {"normalize": {"stats": str(tmp / "stats.json")}}},
    }
    return _offline_run(tmp, "memorybench-off-policy", standins, scale)


@pytest.mark.slow
def test_a_memorybench_run_sets_tables_10_and_11_beside_ours(memorybench_run, capsys):
    results = memorybench_run / "results"
    summary = pd.read_parquet(results / "summary.parquet")
    normalized = summary[summary["aggregate"] == "normalized"].set_index(["system", "metric"])
    ours = normalized.loc[("bm25_session", "weighted_average"), "value"]
    text = (results / "summary.md").read_text()
    assert "## Published vs ours" in text and "memorybench/off_policy_minmax.qwen3-8b" in text
    assert cli(["compare", str(results), "--preset", "memorybench-off-policy"]) == 0
    out = capsys.readouterr().out
    assert "108 published cells; 4 paired with the run" in out
    row = re.search(r"^\| memorybench \| off_policy_minmax\.qwen3-8b \| BM25-S \| bm25_session \| "
                    r"off_policy \| mean \|(?: mean \|)? weighted_average \| 0\.478 \| "
                    r"([0-9.]+) \|",
                    out, re.M)  # fmt: skip
    assert row and float(row.group(1)) == pytest.approx(ours, abs=5e-4)


# --- compare --preset on a stand-in run of every preset ------------------------------------------

#: The summary rows (metric, aggregate) a run of each loader writes that compare reads.
LOADER_ROWS = {
    "amemgym": [("memory_score", "mean_over_periods"), ("accuracy", "mean_over_periods"),
                ("memory_score", "micro"), ("accuracy", "micro")],
    "locomo": [("f1", "micro"), ("f1", "type:single-hop"), ("j", "micro")],
    "longmemeval": [("accuracy", "micro")],
    "memorybench": [("weighted_average", "normalized"), ("z_score", "normalized")],
}  # fmt: skip
#: Protocols that score several steps (periods): the stand-in has steps 0 and 1.
STEPPED = {"interactive", "interactive_replay", "stepwise_off_policy", "on_policy"}


def standin_summary(name: str) -> pd.DataFrame:
    """The summary of a run of preset ``name`` (every benchmark, system, protocol and step it
    plans, steps cut to two), with made-up values: what `compare --preset` reads."""
    config = merged(*layers(PRESETS / f"{name}.yaml"))
    rows = []
    for bench in config["run"]["benchmarks"]:
        spec = config["benchmarks"][bench]
        systems = spec.get("systems") or config["run"]["systems"]
        for protocol in spec.get("protocols") or ["qa"]:
            for i, system in enumerate(systems):
                for step in (0, 1) if protocol in STEPPED else (0,):
                    for metric, aggregate in LOADER_ROWS[spec["loader"]]:
                        value = 0.2 + 0.05 * i + 0.01 * step
                        rows.append({"benchmark": bench, "system": system, "protocol": protocol,
                                     "step": step, "metric": metric, "aggregate": aggregate,
                                     "value": value, "n": 40})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("name", NAMES)
def test_compare_preset_sets_out_every_presets_section(name, tmp_path, capsys):
    """Every preset prints a published-vs-ours section on a run of it: its paired systems beside
    the paper's rows (or, where the paper published no numbers, ours with the reason), and the
    paper's rows without a counterpart each with the preset's reason, by default."""
    write_table(standin_summary(name), tmp_path / "summary.parquet", SUMMARY)
    assert cli(["compare", str(tmp_path), "--preset", name]) == 0
    out = capsys.readouterr().out
    assert "## Published vs ours" in out
    own = preset(name)
    ran = set(standin_summary(name)["system"])
    for system, spec in own["systems"].items():
        if "published_as" in spec and system in ran:
            assert f"| {spec['published_as']} | {system} |" in out, (name, system)
    assert "| not paired |" not in out  # every unpaired row says why
    for row, why in (own["compare"].get("unpaired") or {}).items():
        assert re.search(rf"^\| \w+ \| [^|]+ \| {re.escape(row)} \| \d+ \| {re.escape(why)}",
                         out, re.M), (name, row)  # fmt: skip
    if own["compare"]["published"] is None:
        assert f"against {own['compare']['paper']}/{own['compare']['table']}: no published" in out
        assert "| – | " in out  # our value, no published one beside it


@pytest.mark.parametrize("name", NAMES)
def test_report_preset_shows_the_section_compare_preset_prints(name, tmp_path, capsys):
    """`mnemoflow report --preset NAME` works for every preset, and its report.html shows the cells
    `compare --preset NAME` prints (the same frame); where the paper published no numbers: ours
    with intervals and the reason per row, and the plotted rows no system of ours stands for."""
    summary = standin_summary(name)
    if name == "memorybench-on-policy":  # Mem0's plotted panel without its system, as below
        summary = summary[summary["system"] != "mem0_paper"]
    write_table(summary, tmp_path / "summary.parquet", SUMMARY)
    assert cli(["compare", str(tmp_path), "--preset", name, "--out", str(tmp_path / "cmp")]) == 0
    capsys.readouterr()
    args = ["report", "--results", str(tmp_path), "--preset", name, "--no-questions"]
    assert cli(args) == 0
    page = (tmp_path / "report.html").read_text().replace("<wbr>", "")
    assert ">Published vs ours<" in page
    read = lambda path: pd.read_csv(path, sep="\t")  # noqa: E731
    cells = read(tmp_path / "report" / "published_cells.tsv")  # floats written to 6 digits
    pd.testing.assert_frame_equal(cells, read(tmp_path / "cmp" / "published.tsv"), rtol=1e-5)
    compare = preset(name)["compare"]
    if compare["published"] is not None:
        assert "not shipped" not in page
        return
    plotted = read(tmp_path / "report" / "published_plotted.tsv")
    pd.testing.assert_frame_equal(plotted, read(tmp_path / "cmp" / "unpaired.tsv"), rtol=1e-5)
    what = f"{compare['paper']}/{compare['table']}"
    assert f"No published numbers for {what}: " in page and f"Our {len(cells)} cells" in page
    assert len(cells) and cells["published"].isna().all() and cells["note"].notna().all()
    for cell in cells.itertuples(index=False):  # our value, interval and reason, in one row
        ci = cell.ci_method if isinstance(cell.ci_method, str) else "–"
        if pd.notna(cell.ci_low):
            ci = f"[{cell.ci_low:.3f}, {cell.ci_high:.3f}]"
        row = (f"<td>{cell.metric}</td><td>{cell.ours:.3f}</td><td>{ci}</td>"
               f"<td class=\"num\">{cell.n}</td><td>{html.escape(cell.note)}</td>")  # fmt: skip
        assert row in page, (name, cell)
    for alone in plotted.itertuples(index=False):
        assert html.escape(alone.reason) in page
    if name == "memorybench-on-policy":
        assert len(plotted) == 2 and "Plotted rows without a counterpart in the run" in page


def test_a_plotted_only_experiment_lists_ours_with_the_figure_that_plots_it(tmp_path, capsys):
    write_table(standin_summary("memorybench-stepwise"), tmp_path / "summary.parquet", SUMMARY)
    assert cli(["compare", str(tmp_path), "--preset", "memorybench-stepwise"]) == 0
    out = capsys.readouterr().out
    # 7 sets x 6 systems x 2 metrics at the last step (1)
    assert "Our 84 cells" in out
    row = re.search(r"^\| memorybench \| stepwise_off_policy\.qwen3-8b \| BM25-S \| bm25_session "
                    r"\| stepwise_off_policy \| 1 \| normalized \| weighted_average \| – \| "
                    r"([0-9.]+) \|[^\n]*\| the paper plots this experiment only "
                    r"\(Figure 10\(a\)\); no numbers published \| mb_legal \|$",
                    out, re.M)  # fmt: skip
    assert row and float(row.group(1)) == pytest.approx(0.31)
    assert re.search(r"\| Vanilla \| none \|[^\n]*not in the paper: its Figure 8 plots BM25-S, "
                     r"Embed-S only \| mb_open_domain \|$", out, re.M)  # fmt: skip
    assert re.search(r"\| BM25-M \| bm25_message \|[^\n]*plot the Open, Academic and Legal "
                     r"domains only \| mb_long_long \|$", out, re.M)  # fmt: skip
    # --all: every step of the curve
    assert cli(["compare", str(tmp_path), "--preset", "memorybench-stepwise", "--all"]) == 0
    assert "Our 168 cells" in capsys.readouterr().out


def test_a_plotted_row_without_a_system_is_listed_with_its_figure(tmp_path, capsys):
    """On-policy: Figure 7(c) plots A-Mem, which mnemoflow has not adapted; a run without
    mem0_paper leaves Mem0's panel without a counterpart too."""
    summary = standin_summary("memorybench-on-policy")
    write_table(summary[summary["system"] != "mem0_paper"], tmp_path / "s.parquet", SUMMARY)
    assert cli(["compare", str(tmp_path / "s.parquet"), "--preset", "memorybench-on-policy"]) == 0
    out = capsys.readouterr().out
    assert ("| memorybench | on_policy.qwen3-8b | A-Mem | 0 | the a-mem product is not adapted "
            "(notes_linked is only A-Mem-style) (Figure 7(c), mb_legal) |") in out  # fmt: skip
    assert ("| Mem0 | 0 | its counterpart mem0_paper is not in the run (Figure 7(d), mb_legal) |"
            in out)  # fmt: skip


def test_a_preset_without_shipped_numbers_lists_ours_in_summary_md(tmp_path):
    """The run's own summary.md (report/reproduction.py) carries the same section."""
    write_table(standin_summary("amemgym-evolution"), tmp_path / "summary.parquet", SUMMARY)
    config = merged(*layers(PRESETS / "amemgym-evolution.yaml"))
    request = Request.from_params(request_of(config).as_params())
    _, lines = published_section(tmp_path / "summary.parquet", request)
    text = "\n".join(lines)
    assert "No published numbers for amemgym/self_evolution.gpt-4.1-mini" in text
    assert re.search(r"^\| amemgym \| self_evolution\.gpt-4\.1-mini \| question only \| "
                     r"awi_evolve_question_only \| interactive \| mean \| mean_over_periods \| "
                     r"memory_score \| – \| 0\.260 \|[^\n]*not shipped", text, re.M)  # fmt: skip


def test_the_workflows_report_of_a_preset_without_shipped_numbers_lists_ours(tmp_path):
    """The report rule's job (jobs/summary.py) shows the section summary.md has: our cells with
    the reason, and the dossier places each cell in its run (of its own MemoryBench set)."""
    name = "memorybench-stepwise"
    write_table(standin_summary(name), tmp_path / "summary.parquet", SUMMARY)
    write_table(empty("diagnosis"), tmp_path / "diagnosis.parquet", "diagnosis")
    config = merged(*layers(PRESETS / f"{name}.yaml"))
    files = ReportFiles(
        summary=str(tmp_path / "summary.parquet"),
        diagnosis=str(tmp_path / "diagnosis.parquet"),
        judgements=[],
        ledgers=[],
        html=str(tmp_path / "report.html"),
    )
    report_job(files, config=config, published=request_of(config).as_params())
    page = (tmp_path / "report.html").read_text().replace("<wbr>", "")
    assert "No published numbers for memorybench/stepwise_off_policy.qwen3-8b: " in page
    assert "The paper&#x27;s numbers for this run are not shipped" not in page  # not one line
    assert (
        '<td>weighted_average</td><td>0.310</td><td>–</td><td class="num">40</td><td>the '
        "paper plots this experiment only (Figure 10(a)); no numbers published</td>"
    ) in page
    cells = pd.read_csv(tmp_path / "report" / "published_cells.tsv", sep="\t")
    assert len(cells) == 84 and cells["published"].isna().all()  # 7 sets x 6 systems x 2
    dossier = json.loads((tmp_path / "report" / "dossier.json").read_text())
    assert [c["run"] for c in dossier["published"]] == [
        f"{c.benchmark}/{c.system}/{c.protocol}" for c in cells.itertuples(index=False)
    ]


def test_a_full_memorybench_run_pairs_mem0_where_the_paper_has_it(tmp_path, capsys):
    """The paper prints no Mem0 on Open and Long-Short ("-"): a run of every set with mem0_paper
    is compared on the other five, not refused; a label naming no row still is."""
    write_table(standin_summary("memorybench-off-policy"), tmp_path / "summary.parquet", SUMMARY)
    assert cli(["compare", str(tmp_path), "--preset", "memorybench-off-policy"]) == 0
    out = capsys.readouterr().out
    mem0 = re.findall(r"^\| memorybench \| off_policy_\w+\.qwen3-8b \| Mem0 \| mem0_paper \|"
                      r"[^\n]*\| (mb_\w+) \|$", out, re.M)  # fmt: skip
    assert len(mem0) == 10 and not {"mb_open_domain", "mb_long_short"} & set(mem0)
    args = ["compare", str(tmp_path), "--preset", "memorybench-off-policy", "--map", "none=Nope"]
    assert cli(args) == 2
    assert "the published tables have no row 'Nope'" in capsys.readouterr().err


def test_a_map_naming_no_system_of_the_run_is_refused_without_published_numbers(tmp_path, capsys):
    """As with published numbers: ``--map OURS=THEIRS`` whose OURS the run lacks is one line,
    not a pairing silently dropped."""
    write_table(standin_summary("amemgym-evolution"), tmp_path / "summary.parquet", SUMMARY)
    args = ["compare", str(tmp_path), "--preset", "amemgym-evolution", "--map", "nope=Complete"]
    assert cli(args) == 2
    error = capsys.readouterr().err
    assert "pairing nope=Complete (--map or published_as): the run has no system 'nope'" in error


def test_a_run_of_another_protocol_is_not_listed_as_the_plotted_experiment(tmp_path, capsys):
    """An off-policy run held against the stepwise preset has no stepwise value to list."""
    summary = standin_summary("memorybench-stepwise").assign(protocol="off_policy")
    write_table(summary, tmp_path / "summary.parquet", SUMMARY)
    assert cli(["compare", str(tmp_path), "--preset", "memorybench-stepwise"]) == 0
    out = capsys.readouterr().out
    assert "Our 0 cells" in out and "The run has no value of weighted_average, z_score" in out
