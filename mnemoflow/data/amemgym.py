"""AMemGym (AGI-Eval/AMemGym, ``v1.base/data.json``) in unified form.

The file is a list of users ``{id, start_time, user_profile, state_schema, periods, qas}``. A user
is an episode; its periods are the protocol's steps (period 0 is the initial state). Each period
has sessions ``{event, exposed_states, query, messages, session_time}`` and the user's ``state``
at the period's end; ``qas`` are multiple-choice questions whose choices carry the ``state`` (values
of the question's ``required_info``) under which each answer is the right one.

- Sessions: ``session_id`` = ``{user}_p{period}_s{i}``, ``step`` = period, turns from the
  session's ``messages`` (``turn_id`` = ``{session_id}_{k}``, k 1-based). These are the released
  off-policy messages; on-policy runs replace them with live simulated-user dialogues.
- Questions: every qa is asked at every period's checkpoint (as the official evaluation does), so a
  user with 11 periods and 10 qas gives 110 questions, ``question_id`` = ``{user}_p{period}_q{j}``.
- The gold choice at a period is the one whose ``state`` equals the period's ``state`` on
  ``required_info``. The official script silently falls back to the last choice when none matches;
  here such a (question, period) pair is skipped and listed in the loader's notes instead.
- Options are shuffled once per (user, qa) with ``random.Random(f"{seed}:{user}:{j}")`` (``seed``
  from the spec, default 0; ``shuffle_options: false`` keeps the file order), so the same choice
  text keeps its position across periods and runs. ``meta`` keeps the choices' states in the
  stored order and each option's original index.
- ``evidence_ids`` are the sessions up to the checkpoint whose ``exposed_states`` mention one of
  the question's ``required_info``; their user turns are marked ``has_evidence`` (the release marks
  exposure per session, not per turn).
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.jsonstream import iter_array
from mnemoflow.data.registry import Prepared, register_loader
from mnemoflow.data.sources import BenchmarkInfo, describe, resolve_file, source_of
from mnemoflow.data.tables import QUESTIONS, SESSIONS
from mnemoflow.data.validate import DataError, as_text, field, parse_time, where

BENCHMARK = "amemgym"
TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d")

INFO = describe(
    BenchmarkInfo(
        name=BENCHMARK,
        title="AMemGym: interactive memory benchmarking in long-horizon conversations (ICLR 2026)",
        licence="CC BY 4.0",
        homepage="https://github.com/AGI-Eval-Official/amemgym",
        sources={
            "v1.base": {
                "repo": "AGI-Eval/AMemGym",
                "file": "v1.base/data.json",
                "revision": None,
                "sha256": None,
            }
        },
        counts="v1.base: users with 11 periods (0 = initial) and 10 questions each",
        notes="revision and sha256 are not pinned yet: whoever downloads first fills them in",
    )
)


@dataclass(frozen=True)
class AmemSession:
    """One session of a period: the user's first message (``query``) and what it exposes."""

    query: str
    session_time: str  # "YYYY-MM-DD HH:MM:SS" as in data.json
    exposed_states: dict[str, str]
    event: str | None


@dataclass(frozen=True)
class AmemPeriod:
    """One period; period 0 is the initial state. ``state`` holds at the period's checkpoint."""

    index: int
    period_start: str | None
    period_end: str | None
    state: dict[str, str]
    updates: dict[str, Any]
    sessions: list[AmemSession]


@dataclass(frozen=True)
class AmemChoice:
    """An answer that is right when the question's ``required_info`` take the values ``state``."""

    state: list[str]
    answer: str
    type: str  # "experience" | "random"


@dataclass(frozen=True)
class AmemQuestion:
    """A checkpoint question; ``choices`` in data.json order, ``index`` its position in ``qas``."""

    index: int
    query: str
    required_info: list[str]
    choices: list[AmemChoice]


@dataclass(frozen=True)
class AmemUser:
    """One user of data.json: an episode whose periods are the steps of the step chain."""

    id: str
    start_time: str
    profile: dict[str, Any]
    profile_text: str  # user_profile.formatted_str: all the simulated user is told about itself
    schema: dict[str, list[str]]
    periods: list[AmemPeriod]
    questions: list[AmemQuestion]


def option_order(seed: Any, user_id: str, question_index: int, n: int, shuffle: bool = True):
    """The seeded, stable order in which a question's choices are shown (indices into choices)."""
    order = list(range(n))
    if shuffle:
        random.Random(f"{seed}:{user_id}:{question_index}").shuffle(order)
    return order


def read_environment(path: str | Path) -> list[AmemUser]:
    """Every user of an AMemGym ``data.json``, with the structure checked field by field."""
    path = Path(path)
    name = path.name
    users = []
    for index, user in iter_array(path):
        user_id = field(user, "id", str, where(name, index))
        loc = where(name, index, user_id)
        profile = field(user, "user_profile", dict, loc)
        schema = field(user, "state_schema", dict, loc)
        periods = []
        for p, period in enumerate(field(user, "periods", list, loc)):
            ploc = f"{loc} periods[{p}]"
            sessions = []
            for k, session in enumerate(field(period, "sessions", list, ploc)):
                sloc = f"{ploc}.sessions[{k}]"
                exposed = session.get("exposed_states") or {}
                sessions.append(
                    AmemSession(
                        query=field(session, "query", str, sloc),
                        session_time=field(session, "session_time", str, sloc),
                        exposed_states={str(a): as_text(b) for a, b in dict(exposed).items()},
                        event=session.get("event"),
                    )
                )
            periods.append(
                AmemPeriod(
                    index=p,
                    period_start=period.get("period_start"),
                    period_end=period.get("period_end"),
                    state={
                        str(a): as_text(b) for a, b in field(period, "state", dict, ploc).items()
                    },
                    updates=dict(period.get("updates") or {}),
                    sessions=sessions,
                )
            )
        questions = []
        for j, qa in enumerate(field(user, "qas", list, loc)):
            qloc = f"{loc} qas[{j}]"
            choices = []
            for c, choice in enumerate(field(qa, "answer_choices", list, qloc)):
                cloc = f"{qloc}.answer_choices[{c}]"
                choices.append(
                    AmemChoice(
                        state=[as_text(v) for v in field(choice, "state", list, cloc)],
                        answer=as_text(field(choice, "answer", (str, int, float), cloc)),
                        type=str(choice.get("type") or ""),
                    )
                )
            questions.append(
                AmemQuestion(
                    index=j,
                    query=field(qa, "query", str, qloc),
                    required_info=[str(t) for t in field(qa, "required_info", list, qloc)],
                    choices=choices,
                )
            )
        users.append(
            AmemUser(
                id=user_id,
                start_time=str(user.get("start_time") or ""),
                profile=profile,
                profile_text=str(profile.get("formatted_str") or ""),
                schema={str(t): [as_text(v) for v in vs] for t, vs in schema.items()},
                periods=periods,
                questions=questions,
            )
        )
    return users


def _source(spec: dict[str, Any]) -> dict[str, Any]:
    return source_of(spec, INFO.sources["v1.base"])


def n_periods(spec: dict[str, Any]) -> int:
    """Steps of the step chain: the largest number of periods of any user."""
    path = resolve_file(_source(spec), BENCHMARK)
    stat = path.stat()
    return _count_periods(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _count_periods(path_text: str, size: int, mtime_ns: int) -> int:
    """Cached per file version: the workflow asks for the step count many times per run."""
    path = Path(path_text)
    most = 0
    for index, user in iter_array(path):
        most = max(most, len(field(user, "periods", list, where(path.name, index))))
    return most


@register_loader(BENCHMARK, steps=n_periods)
def load(spec: dict[str, Any]) -> Prepared:
    """Load ``data.json`` of ``spec['source']``; ``seed`` / ``shuffle_options`` order options."""
    seed = spec.get("seed", 0)
    shuffle = spec.get("shuffle_options", True)
    if not isinstance(shuffle, bool):
        raise DataError(f"{BENCHMARK}: 'shuffle_options' must be true or false")
    return parse(resolve_file(_source(spec), BENCHMARK), seed=seed, shuffle=shuffle)


def _exposed(value: Any) -> set[str]:
    """Names of the state variables a session exposes (a mapping or a list in the release)."""
    if isinstance(value, dict):
        return set(map(str, value))
    if isinstance(value, list):
        return {str(v) if not isinstance(v, dict | list) else json.dumps(v) for v in value}
    return set()


def parse(path: Path, seed: Any = 0, shuffle: bool = True) -> Prepared:
    name = path.name
    sessions: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    skipped: list[str] = []
    for index, user in iter_array(path):
        user_id = field(user, "id", str, where(name, index))
        loc = where(name, index, user_id)
        profile = field(user, "user_profile", dict, loc)
        user_name = profile.get("name") if isinstance(profile.get("name"), str) else "user"
        field(user, "state_schema", dict, loc)
        periods = field(user, "periods", list, loc)
        qas = field(user, "qas", list, loc)
        exposures: list[tuple[int, str, set[str]]] = []  # (period, session id, exposed names)
        session_index = 0
        for p, period in enumerate(periods):
            ploc = f"{loc} periods[{p}]"
            field(period, "state", dict, ploc)
            for s, session in enumerate(field(period, "sessions", list, ploc)):
                sloc = f"{ploc}.sessions[{s}]"
                session_id = f"{user_id}_p{p}_s{s}"
                raw_time = field(session, "session_time", str, sloc, optional=True, default="")
                exposed = _exposed(session.get("exposed_states"))
                exposures.append((p, session_id, exposed))
                messages = field(session, "messages", list, sloc, optional=True, default=[])
                for k, message in enumerate(messages):
                    mloc = f"{sloc}.messages[{k}]"
                    role = field(message, "role", str, mloc)
                    if role not in ("user", "assistant"):
                        raise DataError(f"{mloc}: 'role' must be user or assistant, got {role!r}")
                    sessions.append(
                        {
                            "benchmark": BENCHMARK,
                            "episode_id": user_id,
                            "session_id": session_id,
                            "session_index": session_index,
                            "session_time": parse_time(raw_time, TIME_FORMATS),
                            "step": p,
                            "turn_id": f"{session_id}_{k + 1}",
                            "turn_index": k,
                            "role": role,
                            "speaker": user_name if role == "user" else "assistant",
                            "content": field(message, "content", str, mloc),
                            "has_evidence": role == "user" and bool(exposed),
                        }
                    )
                session_index += 1
        for j, qa in enumerate(qas):
            qloc = f"{loc} qas[{j}]"
            query = field(qa, "query", str, qloc)
            required = field(qa, "required_info", list, qloc)
            choices = field(qa, "answer_choices", list, qloc)
            if not choices:
                raise DataError(f"{qloc}: 'answer_choices' is empty")
            for c, choice in enumerate(choices):
                field(choice, "state", list, f"{qloc}.answer_choices[{c}]")
                field(choice, "answer", (str, int, float), f"{qloc}.answer_choices[{c}]")
            order = list(range(len(choices)))
            if shuffle:
                random.Random(f"{seed}:{user_id}:{j}").shuffle(order)
            options = [as_text(choices[i]["answer"]) for i in order]
            for p, period in enumerate(periods):
                state = period["state"]
                missing = [key for key in required if key not in state]
                if missing:
                    raise DataError(f"{loc} periods[{p}].state: missing {missing[0]!r} (qas[{j}])")
                gold_state = [state[key] for key in required]
                matches = [i for i in order if choices[i]["state"] == gold_state]
                if not matches:
                    skipped.append(f"{user_id} qas[{j}] period {p}")
                    continue
                gold = order.index(matches[0])
                evidence = [
                    sid
                    for ep, sid, names in exposures
                    if ep <= p and names & set(map(str, required))
                ]
                meta = {
                    "period": p,
                    "qa_index": j,
                    "required_info": required,
                    "gold_state": gold_state,
                    "option_states": [choices[i]["state"] for i in order],
                    "option_types": [choices[i].get("type") for i in order],
                    "original_index": order,
                }
                period_end = period.get("period_end")
                questions.append(
                    {
                        "benchmark": BENCHMARK,
                        "dataset": BENCHMARK,
                        "episode_id": user_id,
                        "question_id": f"{user_id}_p{p}_q{j}",
                        "split": "test",
                        "question": query,
                        "answer": options[gold],
                        "question_type": "multiple-choice",
                        "question_time": parse_time(period_end, TIME_FORMATS)
                        if isinstance(period_end, str)
                        else "",
                        "options": options,
                        "gold_option": gold,
                        "evidence_ids": evidence,
                        "checkpoint": p,
                        "lang": "en",
                        "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True),
                    }
                )
    notes = []
    if skipped:
        notes.append(
            f"{name}: {len(skipped)} (question, period) pairs have no choice matching the "
            "period's state and were skipped: " + "; ".join(skipped[:20])
        )
    return Prepared(
        pd.DataFrame(sessions, columns=SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
        notes=notes,
    )
