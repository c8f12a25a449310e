"""Tiny stand-in data for the paper presets (configs/paper/), in each benchmark's released layout,
and the override that points a preset's benchmarks at it.

A preset names the real data by pinned source (a download, or a path to the release); the override
replaces only where the data comes from (``source``, and for MemoryBench the registry and the
statistics file), so a dry run plans the preset's own benchmarks, systems, protocols and steps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from snakemake.utils import update_config

from mnemoflow.config_layers import required_layers
from mnemoflow.data.registry import check_benchmarks
from mnemoflow.environment.knobs import resolved_benchmarks
from mnemoflow.errors import ConfigError
from tests.amemgym_fixtures import environment
from tests.memorybench_release import LOCOMO_RECORD, write_release
from tests.test_data_longmemeval import official_records
from tests.workflow import REPO

PRESETS = REPO / "configs" / "paper"
SITE = REPO / "configs" / "site.example.yaml"
OFFLINE = REPO / "configs" / "site.offline.yaml"

#: The registry's groups (configs/datasets/{domain,task}.json of MemoryBench-code), each with the
#: stand-in's two datasets: a corpus dataset (Locomo-0) and a plain one (LexEval-QA).
DOMAINS = ("Open-Domain", "Legal", "Academic&Knowledge")
TASKS = ("Long-Short", "Short-Long", "Long-Long", "Short-Short")
REGISTRY = {
    "Locomo-0": {
        "dataset_name": "Locomo-0",
        "task_tag": "Long-Short",
        "domain_tag": "Open-Domain",
        "test_metrics": ["f1"],
        "max_output_len": 8192,
        "class_name": "Locomo.Locomo_Dataset",
    },
    "LexEval-QA": {
        "dataset_name": "LexEval-QA",
        "task_tag": "Short-Short",
        "domain_tag": "Legal",
        "test_metrics": ["rougel"],
        "max_output_len": 2048,
        "class_name": "LexEval.LexEval_Dataset",
    },
}


def layers(preset: Path) -> list[Path]:
    """The config files of a preset run, in docs/reproduce.md's order (the site file goes last):
    the preset's ``requires_layers`` (an AMemGym preset: the reference's settings for released
    data), then the preset."""
    return [*(REPO / layer for layer in required_layers(preset)), preset]


def merged(*files: Path) -> dict[str, Any]:
    """config.yaml with ``files`` deep-merged on top, as Snakemake merges --configfile files."""
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    for path in files:
        update_config(config, yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    return config


def locomo_samples() -> list[dict[str, Any]]:
    """One locomo10.json sample: two sessions, a question of each category the reader treats
    differently (single-hop, temporal, adversarial)."""
    record = json.loads(json.dumps(LOCOMO_RECORD))
    conversation = record["conversation"]
    conversation["session_2_date_time"] = "7:10 pm on 20 May, 2023"
    conversation["session_2"] = [
        {"speaker": "Caroline", "dia_id": "D2:1", "text": "I adopted a dog named Biscuit."},
        {"speaker": "Melanie", "dia_id": "D2:2", "text": "Biscuit is a lovely name!"},
    ]
    record["qa"] = [
        {"question": "Where did Melanie paint a sunrise?", "answer": "Paris",
         "evidence": ["D1:2"], "category": 4},
        {"question": "When did Caroline adopt a dog?", "answer": "20 May 2023",
         "evidence": ["D2:1"], "category": 2},
        {"question": "What is Melanie's dog called?", "adversarial_answer": "Biscuit",
         "evidence": ["D2:1"], "category": 5},
    ]  # fmt: skip
    record.update(event_summary={}, observation={}, session_summary={})
    return [record]


def write_standins(folder: Path) -> dict[str, Path]:
    """Every benchmark's stand-in under ``folder``: AMemGym data.json, locomo10.json,
    LongMemEval_S, and a MemoryBench release with its registry and statistics."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"amemgym": folder / "data.json"}  # tests/amemgym_fixtures.py's, periods 0-1 only
    users = [{**user, "periods": user["periods"][:2]} for user in environment()]
    paths["amemgym"].write_text(json.dumps(users, indent=1), encoding="utf-8")
    paths["locomo"] = folder / "locomo10.json"
    paths["locomo"].write_text(json.dumps(locomo_samples()), encoding="utf-8")
    paths["longmemeval"] = folder / "longmemeval_s_cleaned.json"
    paths["longmemeval"].write_text(json.dumps(official_records()), encoding="utf-8")
    registry = folder / "MemoryBench-code" / "configs" / "datasets"
    registry.mkdir(parents=True)
    (registry / "each.json").write_text(json.dumps(REGISTRY), encoding="utf-8")
    grouped = [{**entry, "sample_count": 3} for entry in REGISTRY.values()]
    for name, groups in (("domain", DOMAINS), ("task", TASKS)):
        (registry / f"{name}.json").write_text(json.dumps({g: grouped for g in groups}))
    paths["memorybench_configs"] = registry
    paths["memorybench_stats"] = registry.parent / "final_evaluate_summary_wo_details.json"
    paths["memorybench_stats"].write_text("{}", encoding="utf-8")
    paths["memorybench"] = folder / "MemoryBench"
    write_release(paths["memorybench"], registry)
    return paths


def standin_override(config: dict[str, Any], paths: dict[str, Path]) -> dict[str, Any]:
    """The override that points every benchmark the (merged) preset ``config`` runs at the
    stand-ins of its loader; nothing else changes."""
    benchmarks: dict[str, Any] = {}
    for name in config["run"]["benchmarks"]:
        loader = config["benchmarks"][name]["loader"]
        spec: dict[str, Any] = {"source": {"path": str(paths[loader])}}
        if loader == "memorybench":
            spec["configs"] = str(paths["memorybench_configs"])
            spec["normalize"] = {"stats": str(paths["memorybench_stats"])}
        benchmarks[name] = spec
    return {"benchmarks": benchmarks}


#: Where a benchmark's one-line "missing data" error says each file goes (per loader).
_FILE_PLACES = {
    "amemgym": re.compile(r"source\.path (\S+) does not exist"),
    "locomo": re.compile(r"; place (\S+)$"),
    "longmemeval": re.compile(r"; place (\S+)$"),
}
_MB_FOLDER = re.compile(r"; place the snapshot's files under (\S+)\)")
_MB_FILE = re.compile(r"(?:missing: |; )(\S+) \(https://")


def missing_data_error(config: dict[str, Any], name: str) -> str | None:
    """The one-line error the workflow stops with while benchmark ``name`` has no data (None: its
    data is there)."""
    try:
        check_benchmarks(resolved_benchmarks(config["benchmarks"]), [name])
    except ConfigError as exc:
        return str(exc)
    return None


def place_standins(config: dict[str, Any], paths: dict[str, Path], workdir: Path) -> dict[str, str]:
    """Put the stand-in of every benchmark the (merged) preset ``config`` runs where its one-line
    error (offline, nothing placed yet; run with the workdir as the current folder) says, reading
    the places from the message itself; returns benchmark -> message."""
    said = {}
    for name in config["run"]["benchmarks"]:
        loader = config["benchmarks"][name]["loader"]
        message = missing_data_error(config, name)
        if message is None:  # placed for an earlier benchmark on the same file
            continue
        said[name] = message
        if loader == "memorybench":
            folder = _MB_FOLDER.search(message)  # absent when an earlier preset placed it
            if folder:
                place = workdir / folder.group(1)
                place.parent.mkdir(parents=True, exist_ok=True)
                place.symlink_to(paths["memorybench"], target_is_directory=True)
            for place in map(Path, _MB_FILE.findall(message)):
                source = paths["memorybench_configs"] / place.name
                if place.name == paths["memorybench_stats"].name:
                    source = paths["memorybench_stats"]
                _copy(source, workdir / place)
            continue
        place = _FILE_PLACES[loader].search(message)
        assert place, f"{name}: {message}"
        _copy(paths[loader], workdir / place.group(1))
    return said


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)


def snakemake_in_process(workdir: Path, configfiles: list[Path], *, dry: bool) -> list[str]:
    """Run the workflow in this process (``dry``: a dry run) and return the files it planned.

    In process, not as a subprocess: the workflow fingerprints its code at parse time
    (``mnemoflow.codeversion``, cached per process), which costs a fresh interpreter ~15 s on
    this machine; the presets' runs share one fingerprint. The working directory is restored.
    """
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
    )

    cwd = Path.cwd()
    planned: list[str] = []
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            workflow = api.workflow(
                resource_settings=ResourceSettings(cores=2),
                config_settings=ConfigSettings(
                    configfiles=[REPO / "config.yaml", *map(Path, configfiles)]
                ),
                snakefile=REPO / "Snakefile",
                workdir=workdir,
            )
            dag = workflow.dag(dag_settings=DAGSettings())
            dag.execute_workflow(
                executor="local",
                pseudo_executor="dryrun" if dry else None,
                updated_files=planned,
            )
    finally:
        os.chdir(cwd)
    return planned
