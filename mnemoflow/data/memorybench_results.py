"""The MemoryBench maintainers' published runs (``THUIR/MemoryBench-Results`` on Hugging Face),
read from a local copy as published-number rows (the columns of ``mnemoflow.data.published``).

The release's layout, as its own client reads it (``MemoryBenchResults.from_local`` in
THUIR/MemoryBench ``memorybench.py``): ``manifest.jsonl`` at the root, one JSON object per run with
``exp`` and ``model`` (or one ``setting`` "<exp>-<model>", e.g. "off-policy-Qwen3-8B"),
``dataset_type`` (domain | task | single), ``set_name``, ``baseline`` (the reference's memory
system code name: wo_memory, bm25_message, bm25_dialog, embedder_message, embedder_dialog,
a_mem, mem0, memoryos), ``run_id``, ``relative_dir`` and ``files``; each run's folder holds
``summary.json``, whose ``summary`` object maps a metric to its value (a set's ``average``,
``weighted_average``, ``z_score``, ...), and predictions, evaluation details and its config.

Every number of every ``summary`` becomes one row: paper ``memorybench-results``, table
``<exp>/<model>/<dataset_type>:<set_name>``, row the baseline, protocol ``off_policy`` for
``off-policy`` (mnemoflow's name), period and aggregate ``mean``, the metric and value, the
exact file as source and the run id as note (the release states no data version: ``version``
"unstated"). A malformed manifest or summary fails with one line naming the file, the line or key
and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from mnemoflow.data.jsonstream import iter_jsonl
from mnemoflow.data.published import COLUMNS, MEAN
from mnemoflow.data.validate import DataError

PAPER = "memorybench-results"
#: The release's experiment names -> mnemoflow's protocol names.
PROTOCOLS = {
    "off-policy": "off_policy",
    "stepwise_off-policy": "stepwise_off_policy",
    "on-policy": "on_policy",
    "train_performance": "train_performance",
}
#: The release's ``setting`` prefixes, as its client parses them.
_EXPS = ("off-policy",)
_FIELDS = ("dataset_type", "set_name", "baseline", "run_id", "relative_dir")


def _entry(item: object, where: str) -> dict:
    if not isinstance(item, dict):
        raise DataError(f"{where}: expected a JSON object")
    if "exp" in item and "model" in item:
        exp, model = item["exp"], item["model"]
    elif isinstance(item.get("setting"), str):
        setting = item["setting"]
        prefix = next((e for e in _EXPS if setting.startswith(f"{e}-")), None)
        if prefix is None:
            raise DataError(f"{where}: field 'setting' {setting!r} is not '<exp>-<model>'")
        exp, model = prefix, setting[len(prefix) + 1 :]
    else:
        raise DataError(f"{where}: missing field 'exp' and 'model' (or 'setting')")
    entry = {"exp": exp, "model": model}
    for name in _FIELDS:
        value = item.get(name)
        if not isinstance(value, str) or not value:
            raise DataError(f"{where}: field '{name}' must be a non-empty string, got {value!r}")
        entry[name] = value
    for name in ("exp", "model"):
        if not isinstance(entry[name], str) or not entry[name]:
            raise DataError(f"{where}: field '{name}' must be a non-empty string")
    if entry["exp"] not in PROTOCOLS:
        raise DataError(f"{where}: field 'exp' must be one of {sorted(PROTOCOLS)}, got {exp!r}")
    files = item.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise DataError(f"{where}: field 'files' must be a list of file names")
    entry["files"] = files
    return entry


def read_manifest(root: str | Path) -> list[dict]:
    """The runs of ``root/manifest.jsonl``, each checked (file and line in every error)."""
    path = Path(root) / "manifest.jsonl"
    if not path.is_file():
        raise DataError(f"{path}: no manifest (is {root} a copy of MemoryBench-Results?)")
    return [_entry(item, f"{path}: line {number}") for number, item in iter_jsonl(path)]


def read_results(root: str | Path) -> pd.DataFrame:
    """Every summary number of a local MemoryBench-Results copy as published-number rows (with
    the ``file`` and ``line`` columns of :func:`mnemoflow.data.published.load_published`)."""
    root = Path(root)
    rows = []
    seen: dict[tuple, str] = {}
    for entry in read_manifest(root):
        key = tuple(entry[k] for k in ("exp", "model", "dataset_type", "set_name", "baseline"))
        if key in seen:
            raise DataError(
                f"{root / 'manifest.jsonl'}: run {entry['run_id']!r} repeats {seen[key]!r} "
                f"(exp, model, dataset_type, set_name, baseline = {key})"
            )
        seen[key] = entry["run_id"]
        if "summary.json" not in entry["files"]:
            continue
        path = root / entry["relative_dir"] / "summary.json"
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{path}: listed in the manifest but missing") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: not JSON: {exc.msg}") from None
        scores = summary.get("summary") if isinstance(summary, dict) else None
        if not isinstance(scores, dict):
            raise DataError(f"{path}: missing field 'summary' (an object of metric: value)")
        table = f"{entry['exp']}/{entry['model']}/{entry['dataset_type']}:{entry['set_name']}"
        for metric, value in scores.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue  # nested breakdowns are not one published cell
            if not math.isfinite(value):
                raise DataError(f"{path}: summary.{metric} must be a finite number, got {value}")
            rows.append(
                {
                    "paper": PAPER,
                    "table": table,
                    "version": "unstated",
                    "benchmark": "memorybench",
                    "row": entry["baseline"],
                    "model": entry["model"],
                    "protocol": PROTOCOLS[entry["exp"]],
                    "period": MEAN,
                    "aggregate": MEAN,
                    "metric": metric,
                    "value": float(value),
                    "source": f"{path} summary.{metric}",
                    "note": f"run {entry['run_id']}",
                    "line": 0,
                    "file": str(path),
                }
            )
    return pd.DataFrame(rows, columns=[*COLUMNS, "line", "file"])


#: A run's per-item predictions in the release (``{test_idx, dataset, response, ...}`` as a JSON
#: list, what the reference's ``off-policy.py`` saves and ``mnemoflow import`` reads).
PREDICTIONS = "predict.json"


def run_predictions(root: str | Path, run_id: str | None = None) -> tuple[Path, dict]:
    """(the ``predict.json`` of one run of a local MemoryBench-Results copy, its manifest entry
    with ``summary``: its summary numbers, or ``{}``). ``root`` is the release (its manifest
    names the run: ``run_id``, required when several runs have predictions) or one run's folder
    (``predict.json`` beside ``summary.json``). One line naming the file, run and field."""
    root = Path(root)
    if not (root / "manifest.jsonl").is_file() and (root / PREDICTIONS).is_file():
        entry = {"run_id": root.name, "relative_dir": "."}
    else:
        runs = [e for e in read_manifest(root) if PREDICTIONS in e["files"]]
        chosen = [e for e in runs if run_id in (None, e["run_id"])]
        manifest = root / "manifest.jsonl"
        if not chosen:
            known = sorted(e["run_id"] for e in runs)
            raise DataError(
                f"{manifest}: no run {run_id!r} with {PREDICTIONS} (runs with predictions: "
                f"{known[:8]}{' …' if len(known) > 8 else ''})"
            )
        if len(chosen) > 1:
            known = sorted(e["run_id"] for e in chosen)
            raise DataError(
                f"{manifest}: {len(chosen)} runs have {PREDICTIONS}; name one with --run "
                f"({known[:8]}{' …' if len(known) > 8 else ''})"
            )
        entry = chosen[0]
    path = root / entry["relative_dir"] / PREDICTIONS
    if not path.is_file():
        raise DataError(f"{path}: run {entry['run_id']!r} lists {PREDICTIONS} but it is missing")
    summary_path = path.parent / "summary.json"
    summary = {}
    if summary_path.is_file():
        try:
            content = json.loads(summary_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DataError(f"{summary_path}: not JSON: {exc.msg}") from None
        scores = content.get("summary") if isinstance(content, dict) else None
        summary = {
            k: v
            for k, v in (scores or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
    return path, {**entry, "summary": summary}
