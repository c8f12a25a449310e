"""Stream the records of a top-level JSON array without loading the whole file; read JSON lines.

LongMemEval-M is a single 2.7 GB JSON array of 500 records; ``json.load`` would need tens of GB.
:func:`iter_array` reads the file in chunks and decodes one element at a time with the standard
library's C decoder (``JSONDecoder.raw_decode``), so memory holds one record plus a read buffer.
When a record is larger than the buffer, the read size doubles, so every byte is decoded at most
about twice. A file that ends inside a record is reported as truncated, with the record index.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mnemoflow.data.validate import DataError

_WS = " \t\n\r"
_DECODER = json.JSONDecoder()
#: A record larger than this (characters) is reported as invalid rather than read further.
MAX_RECORD_CHARS = 1 << 28


def _hits_end(buffer: str, exc: json.JSONDecodeError) -> bool:
    """Whether a decode error is the file ending inside a value (truncation), not bad syntax."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(buffer.rstrip(_WS))


def iter_array(path: str | os.PathLike, chunk_size: int = 1 << 20) -> Iterator[tuple[int, Any]]:
    """Yield ``(index, element)`` for each element of the JSON array in ``path``."""
    path = Path(path)
    name = path.name
    decoder = codecs.getincrementaldecoder("utf-8")()
    with path.open("rb") as handle:
        buffer = ""
        consumed = 0  # characters of the file before ``buffer``
        read = 0  # bytes of the file read so far
        eof = False
        want = chunk_size

        def fill(minimum: int) -> bool:
            nonlocal buffer, eof, read
            if eof:
                return False
            pending = len(decoder.getstate()[0])  # bytes of a character the last read split
            data = handle.read(max(minimum, chunk_size))
            try:
                buffer += decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                # the decoder saw the pending bytes, then ``data``: its offset counts from them
                offset = read - pending + exc.start
                raise DataError(
                    f"{name}: not UTF-8: byte 0x{exc.object[exc.start]:02x} at offset {offset:,}"
                ) from exc
            read += len(data)
            if not data:
                eof = True
            return True

        def skip_ws() -> None:
            nonlocal buffer, consumed
            while True:
                stripped = buffer.lstrip(_WS)
                consumed += len(buffer) - len(stripped)
                buffer = stripped
                if buffer or not fill(chunk_size):
                    return

        skip_ws()
        if not buffer:
            raise DataError(f"{name}: empty file, expected a JSON array")
        if buffer[0] != "[":
            raise DataError(f"{name}: expected a JSON array at the top level, found {buffer[0]!r}")
        buffer = buffer[1:]
        consumed += 1
        index = 0
        skip_ws()
        if buffer.startswith("]"):
            return
        while True:
            skip_ws()
            if not buffer:
                raise DataError(f"{name}: truncated JSON: record {index} is missing (file ends)")
            while True:
                try:
                    value, end = _DECODER.raw_decode(buffer)
                except json.JSONDecodeError as exc:
                    if not eof and len(buffer) < MAX_RECORD_CHARS:
                        fill(want)  # the record may continue past the buffer: read more
                        want *= 2
                        continue
                    if eof and _hits_end(buffer, exc):
                        raise DataError(
                            f"{name}: truncated JSON: record {index} is incomplete (file ends "
                            f"at character {consumed + len(buffer)})"
                        ) from exc
                    raise DataError(
                        f"{name}: invalid JSON in record {index} at character "
                        f"{consumed + exc.pos}: {exc.msg}"
                    ) from exc
                break
            want = chunk_size
            yield index, value
            index += 1
            buffer = buffer[end:]
            consumed += end
            skip_ws()
            if not buffer:
                raise DataError(
                    f"{name}: truncated JSON: the array is not closed after record {index - 1}"
                )
            if buffer[0] == ",":
                buffer = buffer[1:]
                consumed += 1
                continue
            if buffer[0] == "]":
                buffer = buffer[1:]
                consumed += 1
                skip_ws()
                if buffer:
                    raise DataError(
                        f"{name}: unexpected data after the JSON array at character {consumed}"
                    )
                return
            raise DataError(
                f"{name}: invalid JSON after record {index - 1} at character {consumed}: "
                f"expected ',' or ']', found {buffer[0]!r}"
            )


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for each non-blank line of the JSON-lines file ``path``; a
    line that is not JSON is a :class:`DataError` naming the file and the line."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: line {number}: not valid JSON: {exc.msg}") from None
            yield number, value
