"""The users of a generation run: personas sampled as the reference samples them.

With a local Nemotron-Personas parquet the reference's draw is reproduced exactly (pandas
``DataFrame.sample(n, random_state=seed)`` after dropping ``exclude_ids``), so the same file and
seed give the reference's users. Without one, the shipped pool ``data/amemgym_personas.jsonl``
(already profile-shaped) is sampled with a seeded generator. Nothing is ever downloaded.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mnemoflow.data.amemgym_procedural import PERSONAS, read_personas
from mnemoflow.data.validate import DataError
from mnemoflow.environment.profile import COMPLEMENTARY_KEYS

#: The Nemotron-Personas columns the reference's profile formatting reads: the persona texts the
#: summary is written from, then the columns the basic fields are derived from.
NEMOTRON_COLUMNS = (
    "uuid",
    *COMPLEMENTARY_KEYS,
    "skills_and_expertise_list",
    "hobbies_and_interests_list",
    "sex",
    "age",
    "marital_status",
    "education_level",
    "bachelors_field",
    "occupation",
)

#: Names the shipped pool's keys: a persona keeps its key when the pool is reordered or grows.
_POOL_NAMESPACE = uuid.UUID("6f1c2b1e-5d2a-4c0e-9a53-2f1f3a0c7e11")


def sample_personas(
    source_path: str | None, n: int, seed: int, exclude_ids: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """``n`` persona records, each with a stable ``key`` (its uuid) used as the user key."""
    excluded = {str(x) for x in exclude_ids}
    if source_path:
        return _sample_parquet(Path(source_path), n, seed, excluded)
    return _sample_pool(PERSONAS, n, seed, excluded)


def _sample_parquet(path: Path, n: int, seed: int, excluded: set[str]) -> list[dict[str, Any]]:
    import pandas as pd

    if not path.is_file():
        raise DataError(f"{path}: persona file not found")
    try:
        frame = pd.read_parquet(path, engine="pyarrow")
    except Exception as exc:  # pyarrow raises several types for a file that is not parquet
        raise DataError(f"{path}: not a readable parquet file: {exc}") from None
    missing = [column for column in NEMOTRON_COLUMNS if column not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column '{missing[0]}' (Nemotron-Personas layout)")
    frame = frame.fillna("")
    if excluded:
        frame = frame[~frame["uuid"].astype(str).isin(excluded)]
    if len(frame) < n:
        raise DataError(
            f"{path}: {len(frame)} personas after excluding {len(excluded)} ids, {n} requested"
        )
    records = frame.sample(n=n, random_state=seed).to_dict(orient="records")
    return [
        {**_native(record), "key": str(record["uuid"]), "source": "nemotron"} for record in records
    ]


def _sample_pool(path: Path, n: int, seed: int, excluded: set[str]) -> list[dict[str, Any]]:
    pool = []
    for persona in read_personas(path):
        key = str(uuid.uuid5(_POOL_NAMESPACE, persona["name"]))
        if key not in excluded:
            pool.append({**persona, "uuid": key, "key": key, "source": "pool"})
    if len(pool) < n:
        raise DataError(
            f"{path}: {len(pool)} personas after excluding {len(excluded)} ids, {n} requested"
        )
    return random.Random(seed).sample(pool, n)


def _native(record: dict[str, Any]) -> dict[str, Any]:
    """Numpy scalars as plain Python values, so a record is JSON-serializable."""
    return {str(k): (v.item() if hasattr(v, "item") else v) for k, v in record.items()}


def personas_file(generate: dict[str, Any], workdir: str | Path | None = None) -> str:
    """The persona source of a ``generate:`` entry: ``personas.path`` (a Nemotron-Personas
    parquet, say) as given, else the pool shipped in ``data/``, relative to ``workdir`` (default:
    the working directory) when it lies inside it, so a copied checkout with its results finds
    its own file and re-plans nothing (a checkout outside the working directory: absolute)."""
    given = (generate.get("personas") or {}).get("path")
    if given:
        return str(given)
    return shipped_path(PERSONAS, workdir)


def shipped_path(path: Path, workdir: str | Path | None = None) -> str:
    """A file shipped in the checkout (``data/``), named relative to ``workdir`` (default: the
    working directory) when it lies inside it, so a copied checkout with its results finds its
    own file and re-plans nothing; else absolute, so a workflow run in another directory
    (``snakemake --directory SCRATCH``) still finds it."""
    base = Path(workdir or Path.cwd()).resolve()
    return str(path.relative_to(base) if path.is_relative_to(base) else path)


def run_personas(personas: str, knobs: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's personas, the same list in every job (seeded by the ``seed`` knob)."""
    shipped = Path(personas).resolve() == PERSONAS.resolve()
    return sample_personas(
        None if shipped else personas,
        knobs["num_user_profiles"],
        knobs["seed"],
        list(knobs["exclude_ids"]),
    )
