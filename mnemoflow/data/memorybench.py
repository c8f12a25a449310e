"""MemoryBench (THUIR/MemoryBench) in unified form: one dataset, a domain or a task group.

The Hub release stores each dataset as ``dataset/<name>/{train,test}`` in the ``datasets``
on-disk format, with columns ``test_idx``, ``input_prompt`` (or ``input_chat_messages``),
``dataset_name``, ``lang``, ``info`` (a Python-literal or JSON string: golden answer, checklist,
criteria ...), ``dialog`` and ``implicit_feedback`` (the simulated user's dialogue and implicit
feedback). Corpus datasets (Locomo-k, DialSim-*) instead carry ``dialog_<key>`` /
``implicit_feedback_<key>`` per baseline memory system, and ``corpus/<name>.jsonl`` holds the
conversation every item of the dataset is asked about. The registry (``configs/datasets``:
``each.json``, ``domain.json``, ``task.json``) tags every dataset with its task and domain and
groups datasets; a set is ``dataset:NAME``, ``domain:NAME`` or ``task:NAME`` exactly as those
files define it (docs/memorybench.md).

Conventions (docs/memorybench.md, docs/tables.md):

- keys are ``(dataset, test_idx)``: ``question_id`` = ``{dataset}:{test_idx}`` (test_idx repeats
  across datasets and across Locomo-0..9); ``split`` as released (or as the official rule draws it
  for raw files).
- ``episode_id``: corpus datasets share one memory per dataset (``episode_id`` = the dataset
  name, sessions from the corpus); every other item is its own episode ``{dataset}:{test_idx}``.
- ``question`` = ``input_prompt``, or the last user message of ``input_chat_messages`` (the full
  list stays in ``meta``); ``answer`` = ``info.golden_answer`` as text (a Locomo category-5 gold is
  its two-option object as JSON, as the release stores it); ``meta.info`` keeps the parsed
  ``info``; ``question_type`` = the dataset's task tag; ``meta`` adds test_idx, domain tag, test
  metrics, maximum output length and sample count from the registry.
- the training split's dialogues and implicit feedback form the ``dialogues`` table
  (:func:`dialogue_rows`), one variant per MemoryBench memory system for corpus datasets.
- String columns are parsed as the official loader does: Python literal first, then JSON, else
  kept as text.

Raw files (MemoryBench-code's ``raw/``) load with the official split (:func:`official_split`):
a LexEval JSONL file (``{instruction, input, answer}``), the NFCats CSV (``question`` column) and
LoCoMo's ``locomo10.json`` (Locomo-k = its k-th conversation, prompts as the reference builds them).
"""

from __future__ import annotations

import ast
import csv
import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.jsonstream import iter_array
from mnemoflow.data.locomo import conversation_rows
from mnemoflow.data.registry import Prepared, register_loader
from mnemoflow.data.sources import (
    BenchmarkInfo,
    check_available,
    describe,
    fetch_to,
    offline,
    resolve_file,
    resolve_folder,
    source_of,
)
from mnemoflow.data.tables import DIALOGUES, QUESTIONS, SESSIONS
from mnemoflow.data.validate import DataError, as_text, field, parse_time, where

BENCHMARK = "memorybench"
REPO = "THUIR/MemoryBench"
#: The Hub dataset's commit: the one a public record of the release names (docs/data.md says what
#: could not be checked from here).
HUB_REVISION = "3acd60a4bd35b43b408f0e6db4c5f1e88df5e96d"
#: The GitHub repository THUIR/MemoryBench (Apache-2.0) at the commit whose registry and paper
#: statistics mnemoflow reads: ``configs/<path>`` -> sha256 of the file at that commit.
CODE_COMMIT = "9a33aae9d0c1d0c472527ab5bb8c7e2be3263e23"
CODE_URL = f"https://raw.githubusercontent.com/THUIR/MemoryBench/{CODE_COMMIT}/configs/"
REGISTRY_FILES = {
    "each.json": "33d4e057377cf1a1d6858ab4c8daa9236725798da03d519210dfb41db44728b6",
    "domain.json": "393ffb02292d1dfa5920df9965f97142f2293a1888a43734b72e8c7f99f99c4c",
    "task.json": "573bff7ded514f331bfffd9596b411134739c6b09615a388ea2a08b427744a2b",
}
PAPER_STATS = "final_evaluate_summary_wo_details.json"
PAPER_STATS_SHA256 = "72d7f56adc43d127538c4f4d233c6c2c6ac344f9ecd6d9507a6e7b13fe368ca9"
SELECTORS = ("dataset", "domain", "task")
_PARSED = ("info", "input_chat_messages")
#: Roles a released dialogue may hold (``system`` comes from ``input_chat_messages``).
DIALOG_ROLES = ("user", "assistant", "system")
#: MemoryBench's memory systems whose own dialogues the corpus datasets carry (``dialog_<key>``).
DIALOG_KEYS = ("bm25", "embedder", "bm25_dialog", "embedder_dialog", "a_mem", "mem0", "memoryos")
#: mnemoflow memory system type -> the MemoryBench system whose dialogues it replays.
_DIALOG_KEY_OF = {
    "bm25_message": "bm25",
    "dense_message": "embedder",
    "bm25_session": "bm25_dialog",
    "dense_session": "embedder_dialog",
    "agentic_external": "mem0",
    "notes_linked": "a_mem",
    "tiered": "memoryos",
}
#: Systems MemoryBench has no counterpart of replay the dialogues of its simplest retriever.
DEFAULT_DIALOG_KEY = "bm25"

INFO = describe(
    BenchmarkInfo(
        name=BENCHMARK,
        title="MemoryBench: memory and continual learning from user feedback (THUIR, 2025)",
        licence="MIT (Hub dataset card); original licences of each source dataset apply",
        homepage="https://github.com/THUIR/MemoryBench",
        sources={"default": {"repo": REPO, "revision": HUB_REVISION}},
        counts="28 datasets in 3 domains and 4 task groups (configs/datasets/each.json); "
        "LexEval-QA raw: 500 items -> 250 sampled -> 200 train / 50 test",
        notes=f"Hub revision {HUB_REVISION}; the registry (configs/datasets) and the paper's "
        f"statistics come from the GitHub repository at {CODE_COMMIT} (docs/data.md)",
    )
)


def dialog_key(system_type: str) -> str:
    """The ``dialog_<key>`` variant a memory system of ``system_type`` replays (corpus datasets).

    MemoryBench generated a corpus dataset's training dialogues once per memory system (round 0
    answered with that system's retrieval); a system replays the ones of its counterpart. Systems
    without one (none, full_context, rag, agentic_incontext, ...) get :data:`DEFAULT_DIALOG_KEY`.
    """
    return _DIALOG_KEY_OF.get(system_type, DEFAULT_DIALOG_KEY)


def dialogues_for(dialogues: pd.DataFrame, system_type: str) -> pd.DataFrame:
    """The released dialogues a system of ``system_type`` memorizes: the plain ``dialog`` of every
    dataset (``system`` "") plus its own variant of the corpus datasets' ``dialog_<key>``."""
    keep = dialogues["system"].isin(["", dialog_key(system_type)])
    return dialogues[keep].reset_index(drop=True)


def parse_value(value: Any) -> Any:
    """A string column as the official loader reads it: Python literal, else JSON, else text."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        try:
            return json.loads(value)
        except ValueError:
            return value


def official_split(
    ids: list[int], sample_count: int | None = None, test_ratio: float = 0.2, seed: int = 42
) -> dict[str, list[int]]:
    """MemoryBench's train/test rule (``BaseDataset.get_test_ids`` with the registry's
    ``sample_count``): when there are more ids than ``sample_count``, keep
    ``random.Random(seed).sample(ids, sample_count)``; the test split is a fresh
    ``random.Random(seed).sample(kept, ceil(test_ratio * len(kept)))``; train is the rest of the
    kept ids in kept order.

    Worked example: LexEval-QA (500 items, sample_count 250) -> 200 train / 50 test, the test
    split starting 128, 332, 114.
    """
    if sample_count is not None and len(ids) > sample_count:
        ids = random.Random(seed).sample(ids, sample_count)
    test = random.Random(seed).sample(ids, math.ceil(test_ratio * len(ids)))
    chosen = set(test)
    return {"train": [i for i in ids if i not in chosen], "test": test}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(f"{BENCHMARK}: registry file {path} does not exist") from exc
    except ValueError as exc:
        raise DataError(f"{path.name}: invalid JSON: {exc}") from exc


def registry(configs: str | Path) -> dict[str, Any]:
    """The official registry: ``each`` (name -> entry); ``domain``, ``task`` (name -> entries)."""
    root = Path(configs).expanduser()
    out = {}
    for kind in ("each", "domain", "task"):
        data = _read_json(root / f"{kind}.json")
        if not isinstance(data, dict):
            raise DataError(f"{kind}.json: expected an object of {kind} entries")
        out[kind] = data
    return out


def parse_set(text: str) -> dict[str, str]:
    """``"domain:Legal"`` -> ``{"domain": "Legal"}`` (the CLI's and the config's set syntax)."""
    kind, sep, name = str(text).partition(":")
    if not sep or kind not in SELECTORS or not name:
        raise DataError(f"set {text!r}: expected KIND:NAME with KIND one of {list(SELECTORS)}")
    return {kind: name}


def sample_count(dataset: str, reg: dict[str, Any] | None) -> int | None:
    """The registry's ``sample_count`` of ``dataset`` (domain.json, else task.json); None when the
    registry has none (then every item is kept, as the reference does)."""
    if reg is None:
        return None
    for kind in ("domain", "task"):
        for entries in reg[kind].values():
            for entry in entries:
                if isinstance(entry, dict) and entry.get("dataset_name") == dataset:
                    if entry.get("sample_count") is not None:
                        return int(entry["sample_count"])
    return None


def select(spec_select: Any, reg: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """``[(dataset, registry entry)]`` for ``{"dataset"|"domain"|"task": NAME}`` (or "KIND:NAME").

    An entry is the dataset's ``each.json`` entry updated with its group entry; a dataset selected
    alone gets its ``sample_count`` from the groups, so its split is the one the release ships.
    """
    if isinstance(spec_select, str):
        spec_select = parse_set(spec_select)
    if not isinstance(spec_select, dict) or len(spec_select) != 1:
        raise DataError(f"{BENCHMARK}: 'select' must be one of {{dataset|domain|task: NAME}}")
    ((kind, name),) = spec_select.items()
    if kind not in SELECTORS:
        raise DataError(f"{BENCHMARK}: select.{kind} is unknown; use one of {list(SELECTORS)}")
    if kind == "dataset":
        if reg is None:
            return [(name, {})]
        if name not in reg["each"]:
            raise DataError(
                f"each.json: dataset {name!r} is not registered; see {sorted(reg['each'])}"
            )
        entry = dict(reg["each"][name])
        count = sample_count(name, reg)
        if count is not None:
            entry.setdefault("sample_count", count)
        return [(name, entry)]
    if reg is None:
        raise DataError(f"{BENCHMARK}: select.{kind} needs 'configs' (the configs/datasets folder)")
    groups = reg[kind]
    if name not in groups:
        raise DataError(f"{kind}.json: no {kind} {name!r}; known: {sorted(groups)}")
    out = []
    for i, entry in enumerate(groups[name]):
        loc = f"{kind}.json: {name}[{i}]"
        dataset = field(entry, "dataset_name", str, loc)
        if dataset not in reg["each"]:
            raise DataError(f"{loc} 'dataset_name': {dataset!r} is not a dataset of each.json")
        out.append((dataset, {**reg["each"][dataset], **entry}))
    return out


def has_corpus(dataset: str) -> bool:
    """Corpus datasets, as the reference loader decides: Locomo-k and DialSim-*."""
    return "Locomo" in dataset or "DialSim" in dataset


def question_id(dataset: str, test_idx: int) -> str:
    """The unique id of an item: test_idx alone repeats across datasets."""
    return f"{dataset}:{test_idx}"


def pinned_files(spec: dict[str, Any]) -> list[tuple[Path, dict[str, Any]]]:
    """The registry and statistics files ``spec`` names, each with its pinned download: the three
    registry files in the ``configs`` folder, and ``normalize.stats`` when it is the paper's
    statistics file (by name; the judge protocol's statistics ship with mnemoflow)."""
    out = []
    if spec.get("configs"):
        folder = Path(str(spec["configs"])).expanduser()
        for name, sha in REGISTRY_FILES.items():
            out.append((folder / name, {"url": f"{CODE_URL}datasets/{name}", "sha256": sha}))
    stats = (spec.get("normalize") or {}).get("stats")
    if stats and Path(str(stats)).name == PAPER_STATS:
        source = {"url": CODE_URL + PAPER_STATS, "sha256": PAPER_STATS_SHA256}
        out.append((Path(str(stats)).expanduser(), source))
    return out


def release_files(names: list[str]) -> list[str]:
    """The paths of the release's folder that the datasets ``names`` are read from."""
    required = [f"dataset/{n}/dataset_dict.json" for n in names]
    return required + [f"corpus/{n}.jsonl" for n in names if has_corpus(n)]


def registered_files(spec: dict[str, Any]) -> list[str]:
    """:func:`release_files` of the spec's set, when its registry is in place to say which
    datasets that is (else none: the missing registry is named instead)."""
    configs, chosen = spec.get("configs"), spec.get("set") or spec.get("select")
    folder = Path(str(configs or "")).expanduser()
    if not (configs and chosen) or not all((folder / n).is_file() for n in REGISTRY_FILES):
        return []
    chosen = select(chosen, registry(configs))
    return release_files([name for name, _ in chosen])


def check(spec: dict[str, Any], where: str) -> None:
    """At startup: the raw file or release folder is there (or a pinned download is allowed), and
    so are the registry and the paper's statistics the spec names. With ``download: true`` and
    online, missing registry and statistics files (a few kB each) are fetched now, pinned by
    sha256, to where the spec names them; otherwise one line names every missing file, where it
    goes and where it comes from."""
    missing = []
    required = registered_files(spec)
    try:
        check_available(
            source_of(spec, INFO.sources["default"]), BENCHMARK, folder=True, required=required
        )
    except DataError as exc:
        missing.append(f"the release's datasets ({exc})")
    for path, source in pinned_files(spec):
        if path.exists():
            continue
        if spec.get("download") and not offline():
            fetch_to(source, path, BENCHMARK)
            continue
        missing.append(f"{path} ({source['url']}, sha256 {source['sha256']})")
    configs = spec.get("configs")
    if configs and not Path(str(configs)).expanduser().is_dir() and not missing:
        raise DataError(f"configs {configs} is not a folder; place MemoryBench's configs/datasets")
    if missing:
        fix = "set download: true, or " if not spec.get("download") else ""
        fix = "offline: " if spec.get("download") and offline() else fix
        raise DataError(
            f"{len(missing)} missing: "
            + "; ".join(missing)
            + f" ({fix}place each file there"
            + (", each dataset/NAME/ folder whole" if required else "")
            + '; docs/data.md "MemoryBench")'
        )


@register_loader(BENCHMARK, check=check)
def load(spec: dict[str, Any]) -> Prepared:
    """Load the selected MemoryBench datasets from a local folder or raw file, the cache, or the
    Hub. ``spec``: ``source``, ``select`` (or ``set: KIND:NAME``), ``configs``."""
    reg = registry(spec["configs"]) if spec.get("configs") else None
    chosen = select(spec.get("set") or spec.get("select", {}), reg)
    source = source_of(spec, INFO.sources["default"])
    if not isinstance(source, dict):
        raise DataError(f"{BENCHMARK}: 'source' must be a mapping (path, or repo/revision)")
    path = Path(str(source["path"])).expanduser() if source.get("path") else None
    if path is not None and path.is_file():
        if reg is None:
            raise DataError(
                f"{path.name}: a raw file needs 'configs' (the registry's sample_count decides "
                "its split)"
            )
        return parse_raw(resolve_file(source, BENCHMARK), chosen)
    names = [name for name, _ in chosen]
    required = release_files(names)
    patterns = [f"dataset/{n}/*" for n in names] + [f"dataset/{n}/*/*" for n in names]
    patterns += [f"corpus/{n}.jsonl" for n in names if has_corpus(n)]
    root = resolve_folder(source, BENCHMARK, required, patterns)
    return combine([parse_dataset(root, name, entry) for name, entry in chosen])


def combine(parts: list[Prepared]) -> Prepared:
    """One Prepared of several datasets' (keys stay unique: they carry the dataset name)."""
    return Prepared(
        pd.concat([p.sessions for p in parts], ignore_index=True),
        pd.concat([p.questions for p in parts], ignore_index=True),
        dialogues=pd.concat([p.dialogues for p in parts], ignore_index=True),
        notes=[n for p in parts for n in p.notes],
    )


def _registry_meta(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("task_tag", "domain_tag", "test_metrics", "max_output_len", "sample_count")
    return {k: entry.get(k) for k in keys if k in entry}


def _question_row(
    dataset: str, split: str, row: dict[str, Any], entry: dict[str, Any], loc: str
) -> dict[str, Any]:
    test_idx = field(row, "test_idx", int, loc)
    info = parse_value(field(row, "info", (str, dict), loc))
    if not isinstance(info, dict):
        raise DataError(f"{loc}: 'info' must be an object (or its Python/JSON text)")
    messages = parse_value(row.get("input_chat_messages"))
    prompt = row.get("input_prompt")
    meta: dict[str, Any] = {"test_idx": test_idx, "info": info, **_registry_meta(entry)}
    if isinstance(prompt, str) and prompt:
        question = prompt
    elif isinstance(messages, list) and messages:
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users or not isinstance(users[-1].get("content"), str):
            raise DataError(f"{loc}: 'input_chat_messages' has no user message with text")
        question = users[-1]["content"]
        meta["input_chat_messages"] = messages
    else:
        raise DataError(f"{loc}: missing field 'input_prompt' (or 'input_chat_messages')")
    lang = field(row, "lang", str, loc)
    for column, value in row.items():
        if column.startswith(("dialog", "implicit_feedback")):
            continue  # -> the dialogues table
        if column not in ("test_idx", "input_prompt", "dataset_name", "lang", *_PARSED):
            meta.setdefault("extra", {})[column] = value
    golden = info.get("golden_answer")
    if "Locomo" in dataset and isinstance(golden, dict):
        answer = json.dumps(golden, ensure_ascii=False)  # category 5, as the release stores it
    else:
        answer = "" if golden is None else as_text(golden)
    evidence = []
    if isinstance(info.get("evidence"), list):
        evidence = [e["dia_id"] for e in info["evidence"] if isinstance(e, dict) and "dia_id" in e]
    return {
        "benchmark": BENCHMARK,
        "dataset": dataset,
        "episode_id": dataset if has_corpus(dataset) else question_id(dataset, test_idx),
        "question_id": question_id(dataset, test_idx),
        "split": split,
        "question": question,
        "answer": answer,
        "question_type": str(entry.get("task_tag", "")),
        "question_time": "",
        "options": [],
        "gold_option": -1,
        "evidence_ids": evidence,
        "checkpoint": 0,
        "lang": lang,
        "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True, default=str),
    }


def _dialog_variants(row: dict[str, Any]) -> dict[str, tuple[Any, Any, str, str]]:
    """key -> (dialog, implicit_feedback, dialog column, feedback column); key "" = ``dialog``."""
    out = {}
    for column in row:
        if not column.startswith("dialog"):
            continue
        key = column.removeprefix("dialog").lstrip("_")
        feedback_column = f"implicit_feedback_{key}" if key else "implicit_feedback"
        out[key] = (row[column], row.get(feedback_column), column, feedback_column)
    return out


def dialogue_rows(
    dataset: str, row: dict[str, Any], loc: str, episode_id: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``dialogues`` rows of one released training item, and notes on feedback it skipped.

    The item's input (its prompt, or every message of ``input_chat_messages``, which may hold
    earlier turns) and the first answer are round 0; after it, round r is user message r and the
    answer to it; user message r (r >= 1) carries the implicit feedback record of round r. A
    record that ended the dialogue has no user message in the release (the reference drops the
    text), so it becomes a user turn with empty content and ``terminated`` true.

    Corpus datasets: the plain ``dialog`` (if any) is unused by the reference and skipped; every
    ``dialog_<key>`` becomes a variant with ``system`` = key. A first user turn's
    ``origin_content`` (the question before retrieval was pasted in) is used as its content: the
    reference memorizes the retrieval-augmented prompt (a bug, docs/memorybench.md).
    """
    test_idx = int(row["test_idx"])
    messages = parse_value(row.get("input_chat_messages"))
    # the input (one prompt, or a chat that may hold earlier turns) is round 0
    n_input = len(messages) if isinstance(messages, list) and messages else 1
    variants = _dialog_variants(row)
    if has_corpus(dataset):
        variants = {k: v for k, v in variants.items() if k}
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for key, (raw_dialog, raw_feedback, column, feedback_column) in sorted(variants.items()):
        dialog = parse_value(raw_dialog)
        if dialog is None or dialog == "":
            continue
        if not isinstance(dialog, list):
            raise DataError(f"{loc} '{column}': expected a list of messages")
        feedback = parse_value(raw_feedback) if raw_feedback not in (None, "") else []
        if not isinstance(feedback, list):
            raise DataError(f"{loc} '{feedback_column}': expected a list of feedback records")
        records: dict[int, dict[str, Any]] = {}
        for j, record in enumerate(feedback):
            rloc = f"{loc} '{feedback_column}'[{j}]"
            number = field(record, "round", int, rloc)
            action = field(record, "implicit_action", str, rloc)
            terminated = field(record, "terminated", bool, rloc)
            records[number] = {"implicit_action": action, "terminated": terminated}
        keys = {
            "benchmark": BENCHMARK,
            "system": key,
            "protocol": "",
            "step": 0,
            "episode_id": episode_id,
            "dialogue_id": question_id(dataset, test_idx),
            "source": "data",
        }
        round_, used = 0, set()
        for j, message in enumerate(dialog):
            mloc = f"{loc} '{column}'[{j}]"
            role = field(message, "role", str, mloc)
            if role not in DIALOG_ROLES:
                raise DataError(f"{mloc} 'role': {role!r} is not one of {list(DIALOG_ROLES)}")
            content = message.get("origin_content", message.get("content"))
            if not isinstance(content, str):
                raise DataError(f"{mloc}: missing field 'content'")
            reaction = {"implicit_action": "", "terminated": False}
            if role == "user" and j >= n_input:  # a follow-up after the input's answer
                round_ += 1
                if round_ in records:
                    reaction = records[round_]
                    used.add(round_)
            rows.append({**keys, "round": round_, "role": role, "content": content, **reaction})
        last = round_ + 1
        if last in records and records[last]["terminated"]:
            rows.append({**keys, "round": last, "role": "user", "content": "", **records[last]})
            used.add(last)
        skipped = sorted(set(records) - used)
        if skipped:
            notes.append(
                f"{loc} '{feedback_column}': feedback of rounds {skipped} matches no user turn"
            )
    return rows, notes


def parse_dataset(root: Path, dataset: str, entry: dict[str, Any]) -> Prepared:
    """One dataset of the on-disk release: ``root/dataset/<name>``, ``root/corpus/<name>.jsonl``."""
    import datasets  # slow to import; only needed here

    folder = root / "dataset" / dataset
    try:
        splits = datasets.load_from_disk(str(folder))
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise DataError(f"{folder}: not a datasets on-disk dataset ({exc})") from exc
    questions, dialogues, notes = [], [], []
    seen: set[int] = set()
    for split in ("train", "test"):
        if split not in splits:
            raise DataError(f"{folder}: missing split '{split}'")
        for i, row in enumerate(splits[split]):
            loc = where(f"{dataset}/{split}", i)
            q = _question_row(dataset, split, row, entry, loc)
            test_idx = row["test_idx"]
            if test_idx in seen:
                raise DataError(f"{loc}: duplicate test_idx {test_idx}")
            seen.add(test_idx)
            questions.append(q)
            if split == "train":
                rows, skipped = dialogue_rows(dataset, row, loc, q["episode_id"])
                dialogues.extend(rows)
                notes.extend(skipped)
    sessions: list[dict[str, Any]] = []
    if has_corpus(dataset):
        sessions = corpus_rows(root / "corpus" / f"{dataset}.jsonl", dataset)
        evidence = {turn for q in questions for turn in q["evidence_ids"]}
        for turn in sessions:
            turn["has_evidence"] = turn["turn_id"] in evidence
    return Prepared(
        pd.DataFrame(sessions, columns=SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
        dialogues=pd.DataFrame(dialogues, columns=DIALOGUES.names),
        notes=notes,
    )


_DIALSIM_SESSION = re.compile(r"\[Date: (.*?), Session #(\d+)\]\n\n(.*?)(?=(?:\[Date:)|$)", re.S)
_DIALSIM_LINE = re.compile(r"^(.*?):\s*(.*)$")


def corpus_rows(path: Path, dataset: str) -> list[dict[str, Any]]:
    """The sessions of a corpus dataset: the first JSONL row's ``text``.

    Locomo-k: the text is a LoCoMo record (JSON) and is converted like ``locomo10.json``.
    DialSim-*: the text is a TV-show script (:func:`dialsim_rows`).
    """
    try:
        with path.open(encoding="utf-8") as handle:
            first = handle.readline()
    except FileNotFoundError as exc:
        raise DataError(f"{dataset}: corpus file {path} does not exist") from exc
    try:
        text = field(json.loads(first), "text", str, where(path.name, 0))
    except ValueError as exc:
        raise DataError(f"{path.name}: record 0: invalid JSON: {exc}") from exc
    if "Locomo" in dataset:
        try:
            record = json.loads(text)
        except ValueError as exc:
            raise DataError(f"{path.name}: record 0 'text': not a LoCoMo JSON record") from exc
        conversation = field(record, "conversation", dict, where(path.name, 0))
        return conversation_rows(
            conversation,
            benchmark=BENCHMARK,
            episode_id=dataset,
            session_prefix=dataset,
            loc=where(path.name, 0),
        )
    rows = dialsim_rows(text, dataset)
    if not rows:
        raise DataError(f"{path.name}: record 0 'text': no '[Date: ..., Session #N]' sessions")
    return rows


def dialsim_rows(text: str, dataset: str) -> list[dict[str, Any]]:
    """A DialSim script as sessions, as ``change_dialsim_conversation_to_locomo_form`` reads it.

    Blocks "[Date: D, Session #N]\\n\\n" followed by "Speaker: text" lines; session k (1-based
    order of the blocks) holds the lines that match ``^(.*?):\\s*(.*)$``, stripped; ``turn_id`` is
    ``D<N>:<line>`` with the line counted over every line of the block (a line without a colon is
    skipped but still counted), as the reference numbers dia ids. Every speaker has role "user"
    (a script has no assistant); ``session_time`` is the date in ISO form.
    """
    rows = []
    for index, (date, number, body) in enumerate(_DIALSIM_SESSION.findall(text)):
        turn_index = 0
        for line_no, line in enumerate(body.strip().split("\n"), start=1):
            match = _DIALSIM_LINE.match(line)
            if not match:
                continue
            speaker, content = (part.strip() for part in match.groups())
            rows.append(
                {
                    "benchmark": BENCHMARK,
                    "episode_id": dataset,
                    "session_id": f"{dataset}_s{number}",
                    "session_index": index,
                    "session_time": parse_time(date, ("%B %d, %Y", "%b %d, %Y")),
                    "step": 0,
                    "turn_id": f"D{number}:{line_no}",
                    "turn_index": turn_index,
                    "role": "user",
                    "speaker": speaker,
                    "content": content,
                    "has_evidence": False,
                }
            )
            turn_index += 1
    return rows


# ----------------------------------------------------------------------------- raw files


def parse_raw(path: Path, chosen: list[tuple[str, dict[str, Any]]]) -> Prepared:
    """A raw MemoryBench-code file: LexEval JSONL, NFCats CSV, or LoCoMo's locomo10.json."""
    names = [name for name, _ in chosen]
    if path.suffix == ".csv":
        if names != ["NFCats"]:
            raise DataError(f"{path.name}: an NFCats CSV holds the dataset NFCats, not {names}")
        return _with_split(path, "NFCats", chosen[0][1], nfcats_items(path))
    if path.suffix == ".json" and all(n.startswith("Locomo-") for n in names):
        return locomo_raw(path, chosen)
    if len(chosen) != 1 or not names[0].startswith("LexEval"):
        raise DataError(
            f"{path.name}: a raw file holds one LexEval dataset (JSONL), NFCats (CSV) or "
            f"Locomo-k (locomo10.json); the set selects {names}"
        )
    dataset, entry = chosen[0]
    return _with_split(path, dataset, entry, lexeval_items(path, dataset))


def lexeval_items(path: Path, dataset: str) -> list[dict[str, Any]]:
    """LexEval JSONL rows as records: input = instruction + input, info.golden_answer = answer."""
    items = []
    with path.open(encoding="utf-8") as handle:
        for i, line in enumerate(handle):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{where(path.name, i)}: invalid JSON: {exc}") from exc
            loc = where(path.name, i)
            prompt = field(item, "instruction", str, loc) + field(item, "input", str, loc)
            answer = field(item, "answer", (str, int, float), loc)
            items.append(
                {
                    "test_idx": len(items),
                    "input_prompt": prompt,
                    "dataset_name": dataset,
                    "lang": "zh",
                    "info": {"golden_answer": answer},
                }
            )
    return items


NFCATS_PROMPT = (
    "Please answer the following non-factoid question in English. \n"
    "Keep your answer concise and informative, and do not exceed 200 words.\n\n"
    "Question: {question}"
)


def nfcats_items(path: Path) -> list[dict[str, Any]]:
    """NFCats CSV rows (``question`` column) as records with the reference's answer prompt."""
    items = []
    with path.open(encoding="utf-8", newline="") as handle:
        for i, row in enumerate(csv.DictReader(handle)):
            question = row.get("question")
            if not isinstance(question, str) or not question.strip():
                raise DataError(f"{where(path.name, i)}: missing field 'question'")
            items.append(
                {
                    "test_idx": len(items),
                    "input_prompt": NFCATS_PROMPT.format(question=question),
                    "dataset_name": "NFCats",
                    "lang": "en",
                    "info": {"category": row.get("category", "")},
                }
            )
    return items


def _with_split(
    path: Path,
    dataset: str,
    entry: dict[str, Any],
    items: list[dict[str, Any]],
    sessions: list[dict[str, Any]] | None = None,
) -> Prepared:
    """Questions of raw records, train (in sampled order) then test, by :func:`official_split`."""
    by_idx = {item["test_idx"]: item for item in items}
    split = official_split(list(by_idx), entry.get("sample_count"))
    questions = [
        _question_row(dataset, name, by_idx[i], entry, where(path.name, i))
        for name in ("train", "test")
        for i in split[name]
    ]
    return Prepared(
        pd.DataFrame(sessions or [], columns=SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
        dialogues=pd.DataFrame([], columns=DIALOGUES.names),
    )


CONV_START_PROMPT = (
    "Above is a conversation between two people: {} and {}. The conversation takes place over "
    "multiple days and the date of each conversation is wriiten at the beginning of the "
    "conversation.\n\n"
)
QA_PROMPT = (
    "\nBased on the above context, write an answer in the form of a short phrase for the "
    "following question. Answer with exact words from the context whenever possible.\n\n"
    "Question: {} Short answer:\n"
)
QA_PROMPT_CAT_5 = (
    "\nBased on the above context, answer the following question.\n\nQuestion: {} Short answer:\n"
)
NOT_MENTIONED = "Not mentioned in the conversation"


def locomo_items(record: dict[str, Any], dataset: str, loc: str) -> list[dict[str, Any]]:
    """One locomo10.json conversation as MemoryBench Locomo-k records (``Locomo._load_data``).

    Category 2 questions ask for an approximate date; category 5 ones become a two-option
    question whose options alternate order (first: (a) not mentioned), the gold being the
    ``{"a": ..., "b": ...}`` object. The speakers are named speaker_a then speaker_b: the
    reference takes them from a Python ``set`` (hash-seed dependent order).
    """
    conversation = field(record, "conversation", dict, loc)
    speaker_a = field(conversation, "speaker_a", str, f"{loc} conversation")
    speaker_b = field(conversation, "speaker_b", str, f"{loc} conversation")
    start = CONV_START_PROMPT.format(speaker_a, speaker_b)
    turns = {
        turn.get("dia_id"): turn
        for key, value in conversation.items()
        if key.startswith("session_") and isinstance(value, list)
        for turn in value
        if isinstance(turn, dict)
    }
    items, not_mentioned_first = [], True
    for q, qa in enumerate(field(record, "qa", list, loc)):
        qloc = f"{loc} qa[{q}]"
        category = field(qa, "category", int, qloc)
        question = field(qa, "question", str, qloc)
        if category == 5:
            other = field(qa, "adversarial_answer", str, qloc)
            if not_mentioned_first:
                gold = {"a": NOT_MENTIONED, "b": other}
            else:
                gold = {"a": other, "b": NOT_MENTIONED}
            not_mentioned_first = not not_mentioned_first
            text = f"{question} Select the correct answer: (a) {gold['a']} (b) {gold['b']}. "
            prompt = QA_PROMPT_CAT_5.format(text)
        else:
            gold = field(qa, "answer", (str, int, float), qloc)
            if category == 2:
                question += " Use DATE of CONVERSATION to answer with an approximate date."
            prompt = QA_PROMPT.format(question)
        evidence = [
            turns[e]
            for e in field(qa, "evidence", list, qloc, optional=True, default=[])
            if e in turns
        ]
        items.append(
            {
                "test_idx": len(items),
                "input_prompt": start + prompt,
                "dataset_name": dataset,
                "lang": "en",
                "origin_question": qa["question"],
                "info": {"golden_answer": gold, "category": category, "evidence": evidence},
            }
        )
    return items


def locomo_raw(path: Path, chosen: list[tuple[str, dict[str, Any]]]) -> Prepared:
    """Locomo-k datasets from ``locomo10.json``: conversation k is the corpus, its QA the items."""
    wanted = {}
    for name, entry in chosen:
        suffix = name.removeprefix("Locomo-")
        if not suffix.isdigit():
            raise DataError(f"{path.name}: {name!r} is not a Locomo-k dataset")
        wanted[int(suffix)] = (name, entry)
    parts = {}
    for index, record in iter_array(path):
        if index not in wanted:
            continue
        name, entry = wanted[index]
        loc = where(path.name, index, record.get("sample_id") if isinstance(record, dict) else None)
        items = locomo_items(record, name, loc)
        sessions = conversation_rows(
            record["conversation"],
            benchmark=BENCHMARK,
            episode_id=name,
            session_prefix=name,
            loc=loc,
        )
        evidence = {turn["dia_id"] for item in items for turn in item["info"]["evidence"]}
        for row in sessions:
            row["has_evidence"] = row["turn_id"] in evidence
        parts[index] = _with_split(path, name, entry, items, sessions)
    missing = sorted(set(wanted) - set(parts))
    if missing:
        raise DataError(f"{path.name}: no conversation {missing[0]} for {wanted[missing[0]][0]}")
    return combine([parts[i] for i in sorted(parts)])
