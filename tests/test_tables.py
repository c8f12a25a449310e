import pandas as pd
import pytest

from mnemoflow.data.tables import SCHEMAS, TableError, empty, read_table, write_table


def test_every_schema_round_trips_an_empty_table(tmp_path):
    for name in SCHEMAS:
        path = write_table(empty(name), tmp_path / f"{name}.parquet", name)
        assert list(read_table(path, name).columns) == SCHEMAS[name].names


def test_write_rejects_missing_and_extra_columns(tmp_path):
    frame = empty("scores").drop(columns=["value"]).assign(extra=[])
    with pytest.raises(TableError, match=r"missing \['value'\].*extra \['extra'\]"):
        write_table(frame, tmp_path / "s.parquet", "scores")
    assert not list(tmp_path.iterdir()), "a rejected write leaves no file behind"


def test_write_names_the_column_with_a_wrong_type(tmp_path):
    row = {name: 0 for name in SCHEMAS["scores"].names}
    row.update(benchmark="b", system="s", protocol="qa", metric="m", aggregate="micro")
    row["value"] = "not a number"
    with pytest.raises(TableError, match="'value'"):
        write_table(pd.DataFrame([row]), tmp_path / "s.parquet", "scores")


def test_write_rejects_null_keys(tmp_path):
    row = {name: 0 for name in SCHEMAS["scores"].names}
    row.update(benchmark=None, system="s", protocol="qa", metric="m", aggregate="micro", value=1.0)
    with pytest.raises(TableError, match="'benchmark' has 1 nulls"):
        write_table(pd.DataFrame([row]), tmp_path / "s.parquet", "scores")


def test_write_is_atomic_and_replaces(tmp_path):
    path = tmp_path / "e.parquet"
    write_table(empty("answers"), path, "answers")
    write_table(empty("answers"), path, "answers")
    assert [p.name for p in tmp_path.iterdir()] == ["e.parquet"]
