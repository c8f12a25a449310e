"""The streaming JSON array reader used for LongMemEval's multi-GB files."""

from __future__ import annotations

import json

import pytest

from mnemoflow.data.jsonstream import iter_array, iter_jsonl
from mnemoflow.data.validate import DataError


def test_records_larger_than_the_buffer(tmp_path):
    records = [{"i": i, "text": "é" * (3000 + i), "nested": [1, {"a": None}]} for i in range(20)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    assert [r for _, r in iter_array(path, chunk_size=256)] == records
    assert [i for i, _ in iter_array(path, chunk_size=256)] == list(range(20))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a.json: empty file, expected a JSON array"),
        ('{"a": 1}', "a.json: expected a JSON array at the top level, found '{'"),
        (
            '[{"a": 1}, {"b": "x',
            "a.json: truncated JSON: record 1 is incomplete (file ends at character 19)",
        ),
        ('[{"a": 1}', "a.json: truncated JSON: the array is not closed after record 0"),
        (
            '[{"a": 1} {"b": 2}]',
            "a.json: invalid JSON after record 0 at character 10: expected ',' or ']', found '{'",
        ),
        (
            '[{"a": 1}, {"b" 2}]',
            "a.json: invalid JSON in record 1 at character 16: Expecting ':' delimiter",
        ),
        ("[1, 2] 3", "a.json: unexpected data after the JSON array at character 7"),
    ],
)
def test_errors_name_the_record(tmp_path, text, message):
    path = tmp_path / "a.json"
    path.write_text(text)
    with pytest.raises(DataError) as info:
        list(iter_array(path, chunk_size=4))
    assert str(info.value) == message


def test_empty_array(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(" [ ] ")
    assert list(iter_array(path)) == []


@pytest.mark.parametrize("chunk_size", [3, 7, 4096, 1 << 20])
def test_a_byte_that_is_not_utf8_is_named_by_its_offset_in_the_file(tmp_path, chunk_size):
    """Multi-byte characters before it and any read size (a character split across reads
    included): the offset is the byte's own, 31,010 here, not a character count."""
    head = b'[{"a": "' + "é".encode() * 20 + b"x" * (31_010 - 48)
    path = tmp_path / "a.json"
    path.write_bytes(head + b"\xff" + b'"}]')
    with pytest.raises(DataError) as info:
        list(iter_array(path, chunk_size=chunk_size))
    assert str(info.value) == "a.json: not UTF-8: byte 0xff at offset 31,010"


def test_iter_jsonl_skips_blank_lines_and_names_the_line_that_is_not_json(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n  \n[2, "x"]\n', encoding="utf-8")
    assert list(iter_jsonl(path)) == [(1, {"a": 1}), (4, [2, "x"])]
    path.write_text('{"a": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"rows.jsonl: line 2: not valid JSON: Expecting property"):
        list(iter_jsonl(path))
