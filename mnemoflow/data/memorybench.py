"""MemoryBench (THUIR/MemoryBench) in unified form: one dataset, a domain or a task group.

The Hub release stores each dataset as ``dataset/<name>/{train,test}`` in the ``datasets``
on-disk format, with columns ``test_idx``, ``input_prompt`` (or ``input_chat_messages``),
``dataset_name``, ``lang``, ``info`` (a Python-literal or JSON string: golden answer, checklist,
criteria ...), ``dialog`` and ``implicit_feedback`` (the simulated user's dialogue and implicit
feedback). Corpus datasets (Locomo-k, DialSim-*) instead carry ``dialog_<system>`` /
``implicit_feedback_<system>`` per baseline memory system, and ``corpus/<name>.jsonl`` holds the
conversation every item of the dataset is asked about. The registry (``configs/datasets``:
``each.json``, ``domain.json``, ``task.json``) tags every dataset with its task (Long-Short,
Long-Long, Short-Long, Short-Short) and domain (Open-Domain, Academic&Knowledge, Legal) and
groups datasets; :func:`load` selects a dataset, a domain or a task exactly as those files define.

Conventions (docs/data.md):

- ``dataset`` = the dataset name; ``question_id`` = ``{dataset}_{test_idx}``; ``split`` as released.
- ``episode_id``: corpus datasets share one memory per dataset (``episode_id`` = the dataset
  name, sessions from the corpus); every other item is its own episode ``{dataset}_{test_idx}``
  with no sessions: what the memory learns from is the item's ``dialog`` and
  ``implicit_feedback``, kept in ``meta`` (for corpus datasets, per system in ``meta.dialogs`` and
  ``meta.implicit_feedbacks``).
- ``question`` = ``input_prompt``, or the last user message of ``input_chat_messages`` (the full
  list stays in ``meta``); ``answer`` = ``info.golden_answer`` as text ("" when the dataset is
  judged by checklist or criteria); ``meta.info`` keeps the parsed ``info``;
  ``question_type`` = the dataset's task tag; ``meta`` adds domain tag, test metrics and maximum
  output length from the registry. Locomo-k evidence turns become ``evidence_ids`` (dia ids).
- String columns are parsed as the official loader does: Python literal first, then JSON, else
  kept as text.
- ``sample_count`` of the domain / task registry is recorded in ``meta`` but not applied: the
  released code does not define how it subsamples.

A raw LexEval-QA JSONL file (``{instruction, input, answer}`` rows) loads as the dataset
"LexEval-QA" with the official split rule: item ids in file order, at most 500 of them drawn with
``random.Random(42).sample`` when there are more, and ``ceil(20 %)`` of them drawn, again with
``random.Random(42).sample``, as the test split.
"""

from __future__ import annotations

import ast
import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.locomo import conversation_rows
from mnemoflow.data.registry import Prepared, register_loader
from mnemoflow.data.sources import BenchmarkInfo, describe, resolve_file, resolve_folder, source_of
from mnemoflow.data.tables import QUESTIONS, SESSIONS
from mnemoflow.data.validate import DataError, as_text, field, parse_time, where

BENCHMARK = "memorybench"
REPO = "THUIR/MemoryBench"
SELECTORS = ("dataset", "domain", "task")
_PARSED = ("info", "input_chat_messages")

INFO = describe(
    BenchmarkInfo(
        name=BENCHMARK,
        title="MemoryBench: memory and continual learning from user feedback (THUIR, 2025)",
        licence="MIT (Hub dataset card); original licences of each source dataset apply",
        homepage="https://github.com/THUIR/MemoryBench",
        sources={"default": {"repo": REPO, "revision": None}},
        counts="28 datasets in 3 domains and 4 task groups (configs/datasets/each.json); "
        "LexEval-QA raw: 500 items -> 400 train / 100 test",
        notes="pin source.revision to a commit of THUIR/MemoryBench before downloading; "
        "the registry configs live in the GitHub repository (configs/datasets)",
    )
)


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
    ids: list[int], truncate_size: int = 500, test_ratio: float = 0.2, seed: int = 42
) -> dict[str, list[int]]:
    """MemoryBench's train/test rule (``BaseDataset.get_test_ids`` in the reference code).

    Worked example: 500 LexEval-QA items -> test = ``random.Random(42).sample(ids, 100)``, train =
    the other 400 in file order.
    """
    if truncate_size is not None and len(ids) > truncate_size:
        ids = random.Random(seed).sample(ids, truncate_size)
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


def select(spec_select: Any, reg: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """``[(dataset, registry entry)]`` for ``{"dataset"|"domain"|"task": NAME}``."""
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
        return [(name, reg["each"][name])]
    if reg is None:
        raise DataError(f"{BENCHMARK}: select.{kind} needs 'configs' (the configs/datasets folder)")
    groups = reg[kind]
    if name not in groups:
        raise DataError(f"{kind}.json: no {kind} {name!r}; known: {sorted(groups)}")
    out = []
    for i, entry in enumerate(groups[name]):
        dataset = field(entry, "dataset_name", str, f"{kind}.json: {name}[{i}]")
        out.append((dataset, {**reg["each"].get(dataset, {}), **entry}))
    return out


def has_corpus(dataset: str) -> bool:
    """Corpus datasets, as the reference loader decides: Locomo-k and DialSim-*."""
    return "Locomo" in dataset or "DialSim" in dataset


@register_loader(BENCHMARK)
def load(spec: dict[str, Any]) -> Prepared:
    """Load the selected MemoryBench datasets from a local folder, the cache, or the Hub."""
    reg = registry(spec["configs"]) if spec.get("configs") else None
    chosen = select(spec.get("select", {}), reg)
    source = source_of(spec, INFO.sources["default"])
    if not isinstance(source, dict):
        raise DataError(f"{BENCHMARK}: 'source' must be a mapping (path, or repo/revision)")
    path = Path(str(source["path"])).expanduser() if source.get("path") else None
    if path is not None and path.is_file():
        if len(chosen) != 1:
            raise DataError(f"{path.name}: a raw file holds one dataset; select.dataset it")
        dataset, entry = chosen[0]
        return parse_lexeval_raw(resolve_file(source, BENCHMARK), dataset, entry)
    names = [name for name, _ in chosen]
    required = [f"dataset/{n}/dataset_dict.json" for n in names]
    required += [f"corpus/{n}.jsonl" for n in names if has_corpus(n)]
    patterns = [f"dataset/{n}/*" for n in names] + [f"dataset/{n}/*/*" for n in names]
    patterns += [f"corpus/{n}.jsonl" for n in names if has_corpus(n)]
    root = resolve_folder(source, BENCHMARK, required, patterns)
    prepared = [parse_dataset(root, name, entry) for name, entry in chosen]
    return Prepared(
        pd.concat([p.sessions for p in prepared], ignore_index=True),
        pd.concat([p.questions for p in prepared], ignore_index=True),
        notes=[n for p in prepared for n in p.notes],
    )


def _registry_meta(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("task_tag", "domain_tag", "test_metrics", "max_output_len", "sample_count")
    return {k: entry.get(k) for k in keys if k in entry}


def _question_row(
    dataset: str, split: str, row: dict[str, Any], entry: dict[str, Any], loc: str
) -> dict[str, Any]:
    test_idx = field(row, "test_idx", int, loc)
    info = parse_value(field(row, "info", (str, dict), loc))
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
    dialogs, feedbacks = {}, {}
    for column, value in row.items():
        if column.startswith("dialog"):
            dialogs[column.removeprefix("dialog").lstrip("_") or ""] = parse_value(value)
        elif column.startswith("implicit_feedback"):
            system = column.removeprefix("implicit_feedback").lstrip("_") or ""
            feedbacks[system] = parse_value(value)
        elif column not in ("test_idx", "input_prompt", "dataset_name", "lang", *_PARSED):
            meta.setdefault("extra", {})[column] = value
    if set(dialogs) <= {""} and set(feedbacks) <= {""}:
        meta["dialog"] = dialogs.get("")
        meta["implicit_feedback"] = feedbacks.get("")
    else:
        meta["dialogs"] = dialogs
        meta["implicit_feedbacks"] = feedbacks
    golden = info.get("golden_answer") if isinstance(info, dict) else None
    evidence = []
    if isinstance(info, dict) and isinstance(info.get("evidence"), list):
        evidence = [e["dia_id"] for e in info["evidence"] if isinstance(e, dict) and "dia_id" in e]
    return {
        "benchmark": BENCHMARK,
        "dataset": dataset,
        "episode_id": dataset if has_corpus(dataset) else f"{dataset}_{test_idx}",
        "question_id": f"{dataset}_{test_idx}",
        "split": split,
        "question": question,
        "answer": "" if golden is None else as_text(golden),
        "question_type": str(entry.get("task_tag", "")),
        "question_time": "",
        "options": [],
        "gold_option": -1,
        "evidence_ids": evidence,
        "checkpoint": 0,
        "lang": lang,
        "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True, default=str),
    }


def parse_dataset(root: Path, dataset: str, entry: dict[str, Any]) -> Prepared:
    """One dataset of the on-disk release: ``root/dataset/<name>``, ``root/corpus/<name>.jsonl``."""
    import datasets  # slow to import; only needed here

    folder = root / "dataset" / dataset
    try:
        splits = datasets.load_from_disk(str(folder))
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise DataError(f"{folder}: not a datasets on-disk dataset ({exc})") from exc
    questions = []
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
    sessions: list[dict[str, Any]] = []
    if has_corpus(dataset):
        sessions = corpus_rows(root / "corpus" / f"{dataset}.jsonl", dataset)
    return Prepared(
        pd.DataFrame(sessions, columns=SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
    )


_DIALSIM_SESSION = re.compile(r"\[Date: (.*?), Session #(\d+)\]\n\n(.*?)(?=(?:\[Date:)|$)", re.S)
_DIALSIM_LINE = re.compile(r"^(.*?):\s*(.*)$")


def corpus_rows(path: Path, dataset: str) -> list[dict[str, Any]]:
    """The sessions of a corpus dataset: the first JSONL row's ``text``.

    Locomo-k: the text is a LoCoMo record (JSON) and is converted like ``locomo10.json``.
    DialSim-*: the text is a TV-show script in "[Date: D, Session #N]" blocks of "Speaker: line"
    lines; every speaker is stored with role "user" (there is no assistant in a script), and
    ``turn_id`` is ``D<N>:<line number>`` as the reference code numbers them.
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
    if not rows:
        raise DataError(f"{path.name}: record 0 'text': no '[Date: ..., Session #N]' sessions")
    return rows


def parse_lexeval_raw(path: Path, dataset: str, entry: dict[str, Any]) -> Prepared:
    """A raw LexEval JSONL file (``{instruction, input, answer}``) as a MemoryBench dataset."""
    items = []
    with path.open(encoding="utf-8") as handle:
        for i, line in enumerate(handle):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{where(path.name, i)}: invalid JSON: {exc.msg}") from exc
            loc = where(path.name, i)
            prompt = field(item, "instruction", str, loc) + field(item, "input", str, loc)
            answer = field(item, "answer", (str, int, float), loc)
            items.append({"test_idx": len(items), "input_prompt": prompt, "golden": answer})
    split_of = {}
    for split, ids in official_split([it["test_idx"] for it in items]).items():
        split_of.update(dict.fromkeys(ids, split))
    questions = []
    for item in items:
        if item["test_idx"] not in split_of:
            continue  # beyond the 500 sampled items
        row = {
            "test_idx": item["test_idx"],
            "input_prompt": item["input_prompt"],
            "dataset_name": dataset,
            "lang": "zh",
            "info": {"golden_answer": item["golden"]},
        }
        loc = where(path.name, item["test_idx"])
        q = _question_row(dataset, split_of[item["test_idx"]], row, entry, loc)
        questions.append(q)
    return Prepared(
        pd.DataFrame([], columns=SESSIONS.names), pd.DataFrame(questions, columns=QUESTIONS.names)
    )
