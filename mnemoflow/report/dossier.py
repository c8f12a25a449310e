"""The dossier behind every number: what produced each of our scores, in one JSON file per run.

When a published number does not reproduce, the first questions are always the same: which code,
which data, which models and judge (with which prompt), which sampling settings, what it cost, and
where the per-question answers are. ``results/report/dossier.json`` answers them for every run of
the summary, every headline number and every published-vs-ours cell, from the run's own files:

- ``code``: mnemoflow's version and the checkout's ``git describe``; outside a git checkout the
  fingerprints of the jobs' code (:mod:`mnemoflow.codeversion`) identify it instead.
- per run (``runs``, keyed ``benchmark/system/protocol``): the data (``data_version.json`` and the
  prepared tables, each with its sha256), the models as the run's ledgers bound them (backend,
  model, the address redacted or its host only, sampling settings; never a key or a full
  URL), the judge (the judgements'
  ``judge`` column, the judge's provenance from its ledger, a fingerprint of the code that writes
  its prompt), the cost (:func:`mnemoflow.report.summaries.run_costs`) and the per-question files
  with their sha256.
- ``headline``: each headline number at a run's last step, naming its run.
- ``published``: each published cell beside our value, naming our run and carrying the paper's
  own settings as its CSV states them (``version``, ``model``, ``source``, ``note``).

Paths are as the workflow names them (relative to the directory it ran in).
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from mnemoflow.codeversion import ROOT, code_version
from mnemoflow.data.errata import file_sha256
from mnemoflow.data.published import CELL_KEY
from mnemoflow.report.headline import is_headline
from mnemoflow.report.provenance import git_commit, package_version
from mnemoflow.report.summaries import LedgerFile, last_step, run_of

#: The file's name in the report's derived folder.
NAME = "dossier.json"
#: The dossier's format (a reader checks it before reading the rest).
FORMAT = 1
#: Sampling settings kept from a role's binding, beside backend, model and endpoint.
SAMPLING = ("temperature", "max_tokens", "top_p", "seed")
#: Columns of the published CSVs that state the paper's own settings for a cell.
PAPER_SETTINGS = ("version", "model", "source", "note")
#: How a role's ``base_url`` is written: never the URL itself, which may hold a token.
Address = Callable[[str | None], str | None]
#: Aggregates a headline number is read at (a run's micro mean, AMemGym's mean over periods).
HEADLINE_AGGREGATES = ("micro", "mean_over_periods")


def run_id(benchmark: str, system: str, protocol: str) -> str:
    return f"{benchmark}/{system}/{protocol}"


def file_entry(path: str | Path) -> dict[str, str]:
    return {"path": str(path), "sha256": file_sha256(path)}


def host(url: Any) -> str:
    """Only the host (and port) of an endpoint's address: no user, path or query can leak."""
    if not url:
        return ""
    parts = urlsplit(str(url).strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    name = parts.hostname or ""
    return f"{name}:{port}" if name and port else name


def git_describe(repo: str | Path) -> str | None:
    """``git describe --tags --always --dirty`` of ``repo``; None outside a checkout."""
    try:
        return (
            subprocess.run(
                ["git", "-C", str(repo), "describe", "--tags", "--always", "--dirty"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def job_entries() -> list[str]:
    """Every job of the workflow (``mnemoflow.jobs.<group>:<job>``: a function whose first
    parameter is ``files``), as the rules fingerprint them with ``code_version``."""
    entries = []
    for path in sorted((ROOT / "jobs").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.args.args:
                if node.args.args[0].arg == "files":
                    entries.append(f"mnemoflow.jobs.{path.stem}:{node.name}")
    return entries


def code_identity(
    repo: str | Path | None = None, entries: Iterable[str] | None = None
) -> dict[str, Any]:
    """mnemoflow's version, the commit and ``git describe`` of ``repo`` (default: the package's
    source tree); outside a checkout, ``fingerprints``: each job's ``code_version`` (``entries``,
    default every job), the fingerprints the rules rerun on, so equal fingerprints mean equal
    code."""
    repo = Path(repo) if repo is not None else ROOT.parent
    found: dict[str, Any] = {
        "mnemoflow": package_version("mnemoflow"),
        "commit": git_commit(repo),
        "describe": git_describe(repo),
    }
    if found["describe"] is None:
        found["fingerprints"] = {e: code_version(e) for e in (entries or job_entries())}
    return found


def _plain(value: Any) -> Any:
    """A JSON value: NaN and NA as null, numpy scalars as Python numbers."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def _binding(public: Mapping[str, Any], address: Address) -> dict[str, Any]:
    """A role's binding as a ledger recorded it, reduced to what may be published: its address
    only as ``address`` writes it."""
    out = {key: public.get(key) for key in ("backend", "model", "endpoint")}
    out["address"] = address(public.get("base_url")) or ""
    out.update({key: public.get(key) for key in SAMPLING})
    return out


def _models(ledgers: list[LedgerFile], address: Address) -> dict[str, dict[str, Any]]:
    """role -> its calls and cache hits over the ledgers and every distinct binding they
    recorded (one, unless repeats bind seeded copies), for the roles the run called (a ledger
    describes every bound role, called or not)."""
    roles: dict[str, dict[str, Any]] = {}
    for ledger in ledgers:
        for key, counters in ledger.data["by_role_task"].items():
            entry = roles.setdefault(key.split("/", 1)[0], {"calls": 0, "cache_hits": 0})
            entry["calls"] += int(counters.get("calls", 0))
            entry["cache_hits"] += int(counters.get("cache_hits", 0))
    roles = {role: entry for role, entry in roles.items() if entry["calls"] or entry["cache_hits"]}
    for entry in roles.values():
        entry["bindings"] = []
    for ledger in ledgers:
        for role, public in (ledger.data.get("roles") or {}).items():
            binding = _binding(public, address)
            if role in roles and binding not in roles[role]["bindings"]:
                roles[role]["bindings"].append(binding)
    return dict(sorted(roles.items()))


def _judge(ledgers: list[LedgerFile], judgements: list[str], prompts: Mapping[str, Any]):
    """The judges named by the judgements' ``judge`` column, and the judge's provenance each
    judgements ledger recorded, with its prompt's fingerprint (``prompts``: judge kind -> it)."""
    names: set[str] = set()
    for path in judgements:
        frame = pd.read_parquet(path, columns=["judge"])
        names |= {str(j) for j in frame["judge"].dropna().unique()}
    provenance = []
    for ledger in ledgers:
        record = ledger.data.get("judge")
        if isinstance(record, Mapping):
            record = {**record, **(prompts.get(str(record.get("benchmark"))) or {})}
            if record not in provenance:
                provenance.append(record)
    return {"names": sorted(names), "provenance": provenance}


def _by_run(paths: Iterable[str]) -> dict[tuple[str, str, str], list[str]]:
    runs: dict[tuple[str, str, str], list[str]] = {}
    for path in paths:
        run = run_of(str(path))
        if run is not None:
            runs.setdefault(run, []).append(str(path))
    return runs


def _data(
    benchmark: str,
    versions: Mapping[str, str],
    prepared: Iterable[str],
    environments: Mapping[str, str],
) -> dict[str, Any]:
    """A benchmark's data version (its ``data_version.json``, read and hashed), its prepared
    tables and an interactive benchmark's environment (``data.json``) with their sha256."""
    out: dict[str, Any] = {"version": None, "data_version": None, "prepared": []}
    path = versions.get(benchmark)
    if path:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        out["version"] = record.get("id")
        out["loader"] = record.get("loader")
        out["source"] = record.get("source")
        out["errata"] = record.get("errata")
        out["data_version"] = file_entry(path)
    out["prepared"] = [file_entry(p) for p in prepared if Path(p).parent.parent.name == benchmark]
    if environments.get(benchmark):
        out["environment"] = file_entry(environments[benchmark])
    return out


def build_dossier(
    summary: pd.DataFrame,
    *,
    ledgers: list[LedgerFile],
    costs: pd.DataFrame,
    files: Mapping[str, Iterable[str]],
    versions: Iterable[str] = (),
    prepared: Iterable[str] = (),
    environments: Mapping[str, str] | None = None,
    judge_prompts: Mapping[str, Any] | None = None,
    cells: pd.DataFrame | None = None,
    published: pd.DataFrame | None = None,
    benchmark: str | None = None,
    code: Mapping[str, Any] | None = None,
    address: Address = host,
) -> dict[str, Any]:
    """The dossier (module docstring) of a summary. ``files``: kind (``answers``,
    ``judgements``, ...) -> the per-question files, each placed in its run by its path;
    ``versions``: the ``data_version.json`` files; ``prepared``: the prepared tables;
    ``environments``: interactive benchmark -> its environment's ``data.json``;
    ``cells``: the published-vs-ours cells (:func:`mnemoflow.report.compare.compare_published`)
    and ``published`` the published rows they came from (the paper's settings), paired with our
    ``benchmark`` (default: the published benchmark's name, else the cell's own ``benchmark``, for
    our cells of a paper that published none, else the one run of the cell's system and
    protocol). ``address`` writes a role's ``base_url`` (default: its host only;
    the workflow passes the redacted form of :mod:`mnemoflow.llm.addresses`)."""
    versions_of = {Path(p).parent.parent.name: str(p) for p in versions}
    prepared = [str(p) for p in prepared]
    per_kind = {kind: _by_run(paths) for kind, paths in files.items()}
    ledgers_of: dict[tuple[str, str, str], list[LedgerFile]] = {}
    for ledger in ledgers:
        run = run_of(ledger.path or ledger.label)
        if run is not None:
            ledgers_of.setdefault(run, []).append(ledger)
    cost_of = {(r["benchmark"], r["system"], r["protocol"]): r for r in costs.to_dict("records")}
    keys = summary[["benchmark", "system", "protocol"]].drop_duplicates()
    runs = {}  # (the loop's name is not ``benchmark``: that is the published cells' benchmark)
    for bench, system, protocol in sorted(keys.itertuples(index=False, name=None)):
        run = (bench, system, protocol)
        steps = sorted(int(s) for s in summary.loc[
            (summary["benchmark"] == bench) & (summary["system"] == system)
            & (summary["protocol"] == protocol), "step"].unique())  # fmt: skip
        mine = ledgers_of.get(run, [])
        cost = cost_of.get(run, {})
        runs[run_id(*run)] = {
            "benchmark": bench,
            "system": system,
            "protocol": protocol,
            "steps": steps,
            "data": _data(bench, versions_of, prepared, environments or {}),
            "models": _models(mine, address),
            "judge": _judge(mine, per_kind.get("judgements", {}).get(run, []), judge_prompts or {}),
            "cost": {
                k: cost.get(k)
                for k in ("calls", "tokens_in", "tokens_out", "usd", "usd_per_correct")
            },  # fmt: skip
            "files": {
                kind: [file_entry(p) for p in sorted(found.get(run, []))]
                for kind, found in per_kind.items()
                if found.get(run)
            }
            | {"ledgers": [file_entry(ledger.path) for ledger in mine if ledger.path]},
        }
    return _plain(
        {
            "format": FORMAT,
            "code": dict(code or {}),
            "paths": "relative to the directory the workflow ran in",
            "runs": runs,
            "headline": _headline(summary),
            "published": _published(cells, published, runs, benchmark),
        }
    )


def _headline(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """Each headline number of a run's last step (micro, or the mean over periods), with its
    run."""
    final = last_step(summary)
    final = final[final["metric"].map(is_headline) & final["aggregate"].isin(HEADLINE_AGGREGATES)]
    return [
        {
            "run": run_id(r["benchmark"], r["system"], r["protocol"]),
            **{k: r[k] for k in ("benchmark", "system", "protocol", "step", "metric", "aggregate")},
            "value": r["value"],
            "n": r["n"],
        }
        for r in final.sort_values(["benchmark", "system", "protocol", "metric"]).to_dict("records")
    ]


def _published(
    cells: pd.DataFrame | None,
    published: pd.DataFrame | None,
    runs: Mapping[str, Any],
    benchmark: str | None,
) -> list[dict]:
    """Each published cell: the cell as compared, our run (None: unpaired; the run of
    ``benchmark``, else of the published benchmark's name, as the comparison pairs them), the
    paper's own settings from its CSV row."""
    if cells is None or cells.empty:
        return []
    benchmark_of = {}
    settings = {}
    if published is not None and not published.empty:
        keys = [k for k in (*CELL_KEY, "aggregate") if k in cells.columns and k in published]
        for row in published.to_dict("records"):
            key = tuple(str(row[k]) for k in keys)
            settings[key] = {k: row.get(k, "") for k in PAPER_SETTINGS}
            benchmark_of[key] = row.get("benchmark")
    else:
        keys = []
    out = []
    for cell in cells.to_dict("records"):
        key = tuple(str(cell[k]) for k in keys)
        record = dict(cell)
        ours = benchmark or benchmark_of.get(key) or cell.get("benchmark")
        record["run"] = _run_of_cell(cell, runs, ours)
        record["paper_settings"] = settings.get(key, {})
        out.append(record)
    return out


def _run_of_cell(cell: Mapping[str, Any], runs: Mapping[str, Any], benchmark: str | None):
    """The run a cell is paired with: of ``benchmark``, else the one run of its system and
    protocol; None for an unpaired cell."""
    system, protocol = cell.get("system"), str(cell.get("protocol"))
    if not system:
        return None
    run = run_id(str(benchmark), str(system), protocol)
    if run in runs:
        return run
    same = [k for k, r in runs.items() if r["system"] == system and r["protocol"] == protocol]
    return same[0] if len(same) == 1 else None


#: summary.md's pointer to the dossier (summary.md sits beside report.html).
SUMMARY_LINES = [
    "## Dossier",
    "",
    f"What produced each number above (commit, data version and hash, models and judge with "
    f"prompt version, sampling settings, cost, per-question files): "
    f"[report/{NAME}](report/{NAME}), written with report.html.",
    "",
]
