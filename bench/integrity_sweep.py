"""What the parse-time check of a run's outputs costs: ``python -m bench.integrity_sweep``.

Every ``snakemake`` parse sweeps ``results/`` for corrupt tables and ledgers
(:func:`mnemoflow.data.integrity.sweep`). The first sweep reads each file's Parquet footer or
JSON; later sweeps only ``stat`` the files and re-check what changed. This builds a stand-in
results tree of ``--files`` small tables and ledgers (the count of a paper-scale run) and times,
median of ``--repeat`` runs each:

- ``walk``: the baseline, a bare ``os.walk`` + ``stat`` of the same tree;
- ``first``: a sweep with no saved state (every file checked);
- ``later``: a sweep after one that passed (nothing changed).

It prints the medians and their ratios to the baseline and writes them to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from mnemoflow.data.integrity import STATE, sweep

HERE = Path(__file__).resolve().parent


def build_tree(root: Path, files: int) -> None:
    """``files`` outputs under ``root/results``: half Parquet answers tables, half ledgers, in
    per-step folders as a run lays them out."""
    table = pd.DataFrame({"question_id": ["q0", "q1"], "answer": ["a", "b"]})
    for i in range(files // 2):
        folder = root / "results" / "bench" / f"system{i % 12}" / "qa" / f"step{i // 12}"
        folder.mkdir(parents=True, exist_ok=True)
        table.to_parquet(folder / f"part{i}.parquet", index=False)
        (folder / f"part{i}.ledger.json").write_text(json.dumps({"calls": i}), encoding="utf-8")


def walk(root: Path) -> None:
    for folder, _, names in os.walk(root / "results"):
        for name in names:
            os.stat(os.path.join(folder, name))


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(files: int, repeat: int) -> dict[str, float]:
    runs: dict[str, list[float]] = {"walk": [], "first": [], "later": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_tree(root, files)
        results = root / "results"
        for _ in range(repeat):
            runs["walk"].append(timed(lambda: walk(root)))
            shutil.rmtree(root / STATE.parent, ignore_errors=True)
            runs["first"].append(timed(lambda: sweep(results, root)))
            runs["later"].append(timed(lambda: sweep(results, root)))
    medians = {name: statistics.median(values) for name, values in runs.items()}
    return {
        "files": files,
        "repeat": repeat,
        **{f"{name}_s": round(value, 4) for name, value in medians.items()},
        "first_over_walk": round(medians["first"] / medians["walk"], 1),
        "later_over_walk": round(medians["later"] / medians["walk"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=3480)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "integrity_sweep.json")
    args = parser.parse_args()
    figures = measure(args.files, args.repeat)
    args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
