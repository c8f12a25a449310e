"""The shipped published numbers (data/published/): they load, pinned values, complete tables,
and one-line errors naming file, line and field for malformed files."""

from __future__ import annotations

import pytest

from mnemoflow.data.published import (
    COLUMNS,
    PUBLISHED_DIR,
    load_published,
    read_published,
    select_published,
)
from mnemoflow.data.validate import DataError

PERIODS = ["mean", *map(str, range(11))]


@pytest.fixture(scope="module")
def published():
    return load_published()


def cell(frame, table, row, metric, period="mean", protocol="interactive"):
    hit = frame[
        (frame["table"] == table)
        & (frame["row"] == row)
        & (frame["metric"] == metric)
        & (frame["period"] == period)
        & (frame["protocol"] == protocol)
    ]
    assert len(hit) == 1, (table, row, metric, period, protocol)
    return hit["value"].iloc[0]


def test_every_shipped_csv_loads_and_names_its_source(published):
    files = sorted(PUBLISHED_DIR.glob("*.csv"))
    assert files, "no published CSV shipped"
    assert set(published["file"]) == {str(f) for f in files}
    assert (published["source"].str.len() > 0).all()
    assert (published["paper"] == "amemgym").sum() == 635


def test_pinned_transcribed_values(published):
    assert cell(published, "native_overall", "random", "random") == 0.231
    assert cell(published, "native_overall", "random", "random", "10") == 0.231
    assert cell(published, "memory_agents", "AWE-(2,4,30)", "memory_score") == 0.296
    assert cell(published, "memory_agents", "Mem0-G", "memory_score") == 0.284
    assert cell(published, "memory_agents", "AWI", "memory_score") == 0.177
    assert cell(published, "memory_agents", "AWE-(8,4,30)", "memory_score", "7") == -0.019
    assert cell(published, "native_memory", "gemini-3-pro-preview", "memory_score") == 0.463
    assert cell(published, "native_memory", "gpt-5.2-xhigh", "memory_score") == 0.380
    assert cell(published, "native_memory", "deepseek-v3", "memory_score", "5") == -0.005
    assert cell(published, "native_overall", "gpt-5.1-high", "upper_bound") == 0.965
    assert cell(published, "native_overall", "gpt-4o-mini", "accuracy", "10") == 0.280
    on_off = ("on_vs_off_agents", "AWE-(2,4,30)", "memory_score")
    assert cell(published, *on_off) == 0.291
    assert cell(published, *on_off, protocol="interactive_replay") == 0.253
    assert cell(published, "on_vs_off_agents", "AWE-(2,4,30)", "rank_change") == -3
    assert cell(published, "on_vs_off_native", "gpt-4.1", "rank_change") == 2
    assert cell(published, "diagnosis", "AWI", "read_failure_rate") == 0.245


def _grid(frame, table, metric):
    part = frame[(frame["table"] == table) & (frame["metric"] == metric)]
    return part.pivot(index="row", columns="period", values="value")


@pytest.mark.parametrize(
    ("table", "metric", "rows"),
    [
        ("native_memory", "memory_score", 17),
        ("native_overall", "accuracy", 17),
        ("native_overall", "random", 1),
        ("memory_agents", "memory_score", 13),
    ],
)
def test_per_period_tables_are_complete(published, table, metric, rows):
    """Every row has a value for the mean and each of periods 0-10, and no other period."""
    grid = _grid(published, table, metric)
    assert len(grid) == rows
    assert sorted(grid.columns) == sorted(PERIODS)
    assert not grid.isna().any().any()


def test_one_off_tables_are_complete(published):
    native = set(_grid(published, "native_memory", "memory_score").index)
    assert set(_grid(published, "native_overall", "accuracy").index) == native
    assert set(_grid(published, "native_overall", "upper_bound").index) == native
    for table in ("on_vs_off_agents", "on_vs_off_native"):
        part = published[published["table"] == table]
        assert part.groupby("row").size().eq(3).all() and part["row"].nunique() == 5
    diagnosis = published[published["table"] == "diagnosis"]
    assert (
        diagnosis.groupby("row")["metric"]
        .apply(set)
        .eq({"write_failure_rate", "read_failure_rate", "utilization_failure_rate"})
        .all()
    )


def test_cross_checks_between_slides(published):
    """The native gpt-4.1-mini of slide 11 is the LLM row of slide 12; both tables are sorted
    by their mean, as the figures' legends are."""
    native = _grid(published, "native_memory", "memory_score")
    agents = _grid(published, "memory_agents", "memory_score")
    assert native.loc["gpt-4.1-mini"].equals(agents.loc["LLM"])
    for table, metric in (("native_memory", "memory_score"), ("memory_agents", "memory_score")):
        means = published[
            (published["table"] == table)
            & (published["metric"] == metric)
            & (published["period"] == "mean")
        ]["value"].tolist()
        assert means == sorted(means, reverse=True)


def test_select_by_paper_and_table(published):
    assert len(select_published(published, "amemgym/memory_agents")) == 156
    assert len(select_published(published, "amemgym")) == 635
    with pytest.raises(DataError, match="has no table 'nope' .*memory_agents"):
        select_published(published, "amemgym/nope")
    with pytest.raises(DataError, match="no paper 'x'"):
        select_published(published, "x")


HEADER = ",".join(COLUMNS)
GOOD = "amemgym,t,v1.base,amemgym,AWI,gpt-4.1-mini,interactive,mean,mean,memory_score,.177,slides,"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (GOOD.replace(",.177,", ",.1x7,"), r"line 2: field 'value' must be a number, got '.1x7'"),
        (GOOD.replace(",mean,", ",last,"), r"line 2: field 'period' must be 'mean'"),
        (GOOD.replace(",slides,", ",,"), r"line 2: field 'source' is empty"),
        (GOOD.replace(",AWI,", ",,"), r"line 2: field 'row' is empty"),
        (GOOD + "\n" + GOOD, r"line 3: cell .* already given at .*line 2"),
        (GOOD.replace("memory_score,.177", "rank_change,1.5"), r"line 2: .*must be an integer"),
        (GOOD[: GOOD.rindex(",")], r"line 2: 12 fields, expected 13"),
        (GOOD.replace(",interactive,", ",On-Policy,"), r"line 2: field 'protocol' must be"),
    ],
)
def test_malformed_rows_fail_with_one_line(tmp_path, body, message):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "\n" + body + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as caught:
        load_published(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_bad_header_names_line_1(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER.replace("metric", "measure") + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1: header must be .*missing \['metric'\]"):
        read_published(path)
