"""``mnemoflow data``: what each benchmark is, where it comes from, and what a local file holds.

- ``mnemoflow data list``: every loader with its source (repo / file / revision / sha256), licence
  and official sizes.
- ``mnemoflow data info NAME [--path FILE]``: the same for one benchmark; with ``--path`` (or
  when the project cache holds a copy of one of its sources) it loads the file and prints its
  counts: episodes, sessions, turns, questions and questions per type, plus the loader's notes
  (repaired or skipped records).
- ``mnemoflow data prepare NAME --path FILE --out DIR``: write the unified tables (atomically;
  on bad input nothing is written).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from mnemoflow.commands import COMMANDS
from mnemoflow.data.registry import load_benchmark, loaders, notes_text, records_note
from mnemoflow.data.sources import CATALOG, cache_root, cached_path, sha256_file
from mnemoflow.data.tables import SCHEMAS, to_arrow, write_atomic_text, write_table
from mnemoflow.data.validate import DataError


@COMMANDS.register("data", help="list benchmarks, inspect or prepare their data")
def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", required=True)
    sub.add_parser("list", help="every benchmark loader with source, licence and sizes")
    info = sub.add_parser("info", help="one benchmark; with --path, the counts of a local file")
    prepare = sub.add_parser("prepare", help="write the unified tables of a benchmark")
    for p in (info, prepare):
        p.add_argument("name", help="loader name, e.g. locomo, longmemeval, memorybench, amemgym")
        p.add_argument("--path", help="local file or folder (source.path)")
        p.add_argument("--variant", help="LongMemEval variant: s, m or oracle")
        p.add_argument("--select", help="MemoryBench selection KIND=NAME (dataset/domain/task)")
        p.add_argument("--configs", help="MemoryBench registry folder (configs/datasets)")
        p.add_argument("--spec", help="extra spec keys as JSON, e.g. '{\"limit\": 10}'")
    prepare.add_argument("--out", type=Path, required=True, help="folder for the tables")
    parser.set_defaults(func=run)


def build_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The config entry the command line describes."""
    spec: dict[str, Any] = {"loader": args.name}
    if args.spec:
        try:
            extra = json.loads(args.spec)
        except ValueError as exc:
            raise DataError(f"--spec: invalid JSON: {exc}") from exc
        if not isinstance(extra, dict):
            raise DataError("--spec: must be a JSON object")
        spec.update(extra)
    if args.path:
        spec["source"] = {**spec.get("source", {}), "path": args.path}
    if args.variant:
        spec["variant"] = args.variant
    if args.configs:
        spec["configs"] = args.configs
    if args.select:
        kind, _, name = args.select.partition("=")
        if not name:
            raise DataError(f"--select: expected KIND=NAME, got {args.select!r}")
        spec["select"] = {kind: name}
    return spec


def _cached_default(name: str, spec: dict[str, Any]) -> Path | None:
    """The cached copy of the catalogued source the command line asks for (its ``--variant``,
    else the first), when it names nothing else (no ``--spec`` source, release or selection)."""
    info = CATALOG.get(name)
    if info is None or set(spec) - {"loader", "variant"}:
        return None
    source = info.sources.get(spec.get("variant") or next(iter(info.sources)))
    if source is None or not (source.get("file") or source.get("url")):
        return None
    path = cached_path(source, name)
    return path if path.is_file() else None


def _source_lines(name: str) -> list[str]:
    info = CATALOG.get(name)
    if info is None:
        return ["  source: built in (generated from config parameters)"]
    lines = [f"  {info.title}", f"  licence: {info.licence}", f"  home: {info.homepage}"]
    for variant, source in info.sources.items():
        if source.get("url"):
            origin = source["url"]
        else:
            origin = f"hf://datasets/{source.get('repo')}" + (
                f"/{source['file']}" if source.get("file") else ""
            )
        revision = source.get("revision") or "not pinned"
        sha = source.get("sha256") or "not pinned"
        lines.append(f"  source[{variant}]: {origin} (revision {revision}; sha256 {sha})")
        cached = cached_path(source, name) if source.get("file") or source.get("url") else None
        if cached is not None and cached.is_file():
            lines.append(f"    cached: {cached}")
    if info.counts:
        lines.append(f"  official sizes: {info.counts}")
    if info.notes:
        lines.append(f"  note: {info.notes}")
    return lines


def summary_lines(spec: dict[str, Any]) -> list[str]:
    """Load the benchmark and describe what it holds."""
    prepared = load_benchmark(spec)
    sessions, questions = prepared.sessions, prepared.questions
    episode_sessions = prepared.episode_sessions
    episodes = questions["episode_id"].nunique() if len(questions) else 0
    distinct_sessions = sessions["session_id"].nunique() if len(sessions) else 0
    per_episode = len(episode_sessions) if episode_sessions is not None else 0
    lines = [
        f"  episodes: {episodes}",
        f"  sessions: {distinct_sessions} distinct"
        + (f", {per_episode} in episode histories" if per_episode != distinct_sessions else ""),
        f"  turns: {len(sessions)}",
        f"  questions: {len(questions)}",
    ]
    if len(questions):
        for column in ("dataset", "split", "question_type"):
            counts = questions[column].value_counts().sort_index()
            if len(counts) > 1 or column == "question_type":
                text = ", ".join(f"{k} {v}" for k, v in counts.items())
                lines.append(f"  questions per {column.replace('question_', '')}: {text}")
    lines += [f"  rule: {line}" for line in records_note(prepared)["rules"]]
    lines += [f"  note: {note}" for note in prepared.notes]
    return lines


def run(args: argparse.Namespace) -> int:
    if args.data_command == "list":
        print(f"cache: {cache_root()}")
        for name in loaders():
            print(name)
            print("\n".join(_source_lines(name)))
        return 0
    if args.name not in loaders():
        raise DataError(f"unknown benchmark {args.name!r}; available: {loaders()}")
    spec = build_spec(args)
    if args.data_command == "info":
        print(args.name)
        print("\n".join(_source_lines(args.name)))
        cached = _cached_default(args.name, spec)
        if not args.path and cached is not None:  # counts of the cached copy of that source
            args.path = str(cached)
            spec = build_spec(args)
        if args.path:
            path = Path(args.path)
            if path.is_file():
                size = os.path.getsize(path)
                print(f"  file: {path} ({size:,} bytes, sha256 {sha256_file(path)})")
            print("\n".join(summary_lines(spec)))
        return 0
    prepared = load_benchmark(spec)
    out: Path = args.out
    tables = {
        "sessions": prepared.sessions,
        "episode_sessions": prepared.episode_sessions,
        "questions": prepared.questions,
    }
    for kind, frame in tables.items():  # validate everything before writing anything
        to_arrow(frame, SCHEMAS[kind], where=f"{args.name} {kind}")
    write_table(prepared.sessions, out / "sessions.parquet", "sessions")
    write_table(prepared.episode_sessions, out / "episode_sessions.parquet", "episode_sessions")
    write_table(prepared.questions, out / "questions.parquet", "questions")
    write_atomic_text(out / "notes.txt", notes_text(prepared))
    print(
        f"{out}: {len(prepared.sessions)} turns, {len(prepared.questions)} questions, "
        f"{len(prepared.notes)} notes"
    )
    return 0
