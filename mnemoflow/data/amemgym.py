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
- The gold choice at a period is the first one whose ``state`` equals the period's ``state`` on
  ``required_info``. The official script silently falls back to the last choice when none matches;
  here :func:`read_environment` rejects such a file with a one-line error naming user, period,
  question and field (as it does a required type missing from the schema or a period without a
  state), so every consumer (loader, on-policy loop, scorer) sees only checked environments.
- Options are shuffled once per (user, qa) with ``random.Random(f"{seed}:{user}:{j}")`` (``seed``
  from the spec, default 0; ``shuffle_options: false`` keeps the file order), so the same choice
  text keeps its position across periods and runs. ``meta`` keeps the choices' states in the
  stored order, each option's original index and the period's whole true ``state``.
- ``evidence_ids`` are the sessions up to the checkpoint whose ``exposed_states`` mention one of
  the question's ``required_info``; their user turns are marked ``has_evidence`` (the release marks
  exposure per session, not per turn).
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.jsonstream import iter_array
from mnemoflow.data.registry import Prepared, register_loader
from mnemoflow.data.sources import (
    BenchmarkInfo,
    check_available,
    describe,
    resolve_file,
    source_of,
)
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
        notes="revision and sha256 are not pinned: no public record of either was found "
        '(docs/data.md "AMemGym"); pin both in source when you download it',
    )
)
#: Where a missing release comes from, for the one-line error of a local ``source.path``.
ORIGIN = (
    "the Hub dataset AGI-Eval/AMemGym's v1.base/data.json (2.24 MB, CC BY 4.0, "
    "https://huggingface.co/datasets/AGI-Eval/AMemGym; no revision or sha256 pinned: "
    'docs/data.md "AMemGym")'
)


@dataclass(frozen=True)
class AmemSession:
    """One session of a period: the user's first message (``query``) and what it exposes."""

    query: str
    session_time: str  # "YYYY-MM-DD HH:MM:SS" as in data.json
    exposed_states: dict[str, str]
    event: str | None
    #: released turns ``{"role", "content"}`` (the reference's generator writes none: the
    #: dialogues are made on-policy)
    messages: list[dict[str, str]] = dataclass_field(default_factory=list)


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


def true_state(question: AmemQuestion, period: AmemPeriod) -> list[str]:
    """The values of the question's ``required_info`` at the period's checkpoint."""
    return [period.state[name] for name in question.required_info]


def gold_choice(question: AmemQuestion, period: AmemPeriod) -> int:
    """Index (data.json order) of the first choice whose state is the period's true state.

    :func:`read_environment` has checked that there is one; the reference falls back to the last
    choice silently when there is none.
    """
    state = true_state(question, period)
    return next(i for i, choice in enumerate(question.choices) if choice.state == state)


def read_environment(path: str | Path) -> list[AmemUser]:
    """Every user of an AMemGym ``data.json``, checked so that every consumer can rely on it.

    Beyond the field types: every ``required_info`` type is in ``state_schema``, every period has
    a ``state`` holding every required type, at every period each question has a choice
    whose ``state`` is the period's true state (so a gold answer exists at every checkpoint),
    and no two users share an ``id``.
    """
    path = Path(path)
    users, first = [], {}
    for index, record in iter_array(path):
        user = _read_user(path.name, index, record)
        if user.id in first:  # episodes, snapshot folders and scores are keyed by the id
            raise DataError(
                f"{where(path.name, index, user.id)}: 'id' repeats record {first[user.id]}'s"
            )
        first[user.id] = index
        users.append(user)
    return users


def _read_user(name: str, index: int, user: Any) -> AmemUser:
    user_id = field(user, "id", str, where(name, index))
    loc = where(name, index, user_id)
    profile = field(user, "user_profile", dict, loc)
    schema = {}
    for key, values in field(user, "state_schema", dict, loc).items():
        choices = field({key: values}, key, list, f"{loc} state_schema")
        schema[str(key)] = [as_text(v) for v in choices]
    raw_periods = field(user, "periods", list, loc)
    if not raw_periods:
        raise DataError(f"{loc}: 'periods' is empty")
    periods = [
        _read_period(f"{loc} periods[{p}]", p, period) for p, period in enumerate(raw_periods)
    ]
    questions = [
        _read_question(f"{loc} qas[{j}]", j, qa, schema)
        for j, qa in enumerate(field(user, "qas", list, loc))
    ]
    for period in periods:
        ploc = f"{loc} periods[{period.index}]"
        for question in questions:
            missing = [t for t in question.required_info if t not in period.state]
            if missing:
                raise DataError(
                    f"{ploc}.state: missing {missing[0]!r}, required by qas[{question.index}]"
                )
            state = true_state(question, period)
            if not any(choice.state == state for choice in question.choices):
                raise DataError(
                    f"{ploc} qas[{question.index}].answer_choices: no choice has 'state' {state} "
                    f"(periods[{period.index}].state on required_info {question.required_info})"
                )
    return AmemUser(
        id=user_id,
        start_time=str(user.get("start_time") or ""),
        profile=profile,
        profile_text=str(profile.get("formatted_str") or ""),
        schema=schema,
        periods=periods,
        questions=questions,
    )


def _read_period(ploc: str, p: int, period: Any) -> AmemPeriod:
    state = field(period, "state", dict, ploc)
    sessions = [
        _read_session(f"{ploc}.sessions[{k}]", session)
        for k, session in enumerate(field(period, "sessions", list, ploc))
    ]
    return AmemPeriod(
        index=p,
        period_start=field(period, "period_start", str, ploc, optional=True),
        period_end=field(period, "period_end", str, ploc, optional=True),
        state={str(a): as_text(b) for a, b in state.items()},
        updates=dict(field(period, "updates", dict, ploc, optional=True, default={})),
        sessions=sessions,
    )


def _read_session(sloc: str, session: Any) -> AmemSession:
    exposed = field(session, "exposed_states", dict, sloc, optional=True, default={})
    messages = []
    for k, message in enumerate(field(session, "messages", list, sloc, optional=True, default=[])):
        mloc = f"{sloc}.messages[{k}]"
        role = field(message, "role", str, mloc)
        if role not in ("user", "assistant"):
            raise DataError(f"{mloc}: 'role' must be user or assistant, got {role!r}")
        messages.append({"role": role, "content": field(message, "content", str, mloc)})
    return AmemSession(
        query=field(session, "query", str, sloc),
        session_time=field(session, "session_time", str, sloc),
        exposed_states={str(a): as_text(b) for a, b in exposed.items()},
        event=field(session, "event", str, sloc, optional=True),
        messages=messages,
    )


def _read_question(qloc: str, j: int, qa: Any, schema: dict[str, list[str]]) -> AmemQuestion:
    required = field(qa, "required_info", list, qloc)
    if not required:
        raise DataError(f"{qloc}: 'required_info' is empty")
    for i, info in enumerate(required):
        if not isinstance(info, str):
            raise DataError(f"{qloc}.required_info[{i}]: must be a string, got {info!r:.60}")
        if info not in schema:
            raise DataError(f"{qloc}.required_info[{i}]: {info!r} is not a type of state_schema")
    raw_choices = field(qa, "answer_choices", list, qloc)
    if not raw_choices:
        raise DataError(f"{qloc}: 'answer_choices' is empty")
    choices = []
    for c, choice in enumerate(raw_choices):
        cloc = f"{qloc}.answer_choices[{c}]"
        state = [as_text(v) for v in field(choice, "state", list, cloc)]
        if len(state) != len(required):
            raise DataError(
                f"{cloc}: 'state' has {len(state)} values for {len(required)} required_info"
            )
        choices.append(
            AmemChoice(
                state=state,
                answer=as_text(field(choice, "answer", (str, int, float), cloc)),
                type=str(field(choice, "type", str, cloc, optional=True, default="")),
            )
        )
    return AmemQuestion(
        index=j, query=field(qa, "query", str, qloc), required_info=list(required), choices=choices
    )


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


def check(spec: dict[str, Any], where: str) -> None:
    """At startup: the released data.json is there or a pinned download is allowed (a generated
    environment, ``generate:``, is made by a rule of the run)."""
    _shuffle(spec)
    if not spec.get("generate"):
        check_available(_source(spec), BENCHMARK, origin=ORIGIN)


def _shuffle(spec: dict[str, Any]) -> bool:
    shuffle = spec.get("shuffle_options", True)
    if not isinstance(shuffle, bool):
        raise DataError(f"{BENCHMARK}: 'shuffle_options' must be true or false, got {shuffle!r}")
    return shuffle


@register_loader(BENCHMARK, steps=n_periods, check=check)
def load(spec: dict[str, Any]) -> Prepared:
    """Load ``data.json`` of ``spec['source']``; ``seed`` / ``shuffle_options`` order options."""
    seed = spec.get("seed", 0)
    return parse(resolve_file(_source(spec), BENCHMARK), seed=seed, shuffle=_shuffle(spec))


def parse(path: Path, seed: Any = 0, shuffle: bool = True) -> Prepared:
    """Unified tables of a data.json, built on :func:`read_environment` and :func:`option_order`."""
    sessions: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for user in read_environment(path):
        user_name = user.profile.get("name")
        user_name = user_name if isinstance(user_name, str) else "user"
        exposures: list[tuple[int, str, set[str]]] = []  # (period, session id, exposed names)
        session_index = 0
        for period in user.periods:
            for s, session in enumerate(period.sessions):
                session_id = f"{user.id}_p{period.index}_s{s}"
                exposed = set(session.exposed_states)
                exposures.append((period.index, session_id, exposed))
                for k, message in enumerate(session.messages):
                    role = message["role"]
                    sessions.append(
                        {
                            "benchmark": BENCHMARK,
                            "episode_id": user.id,
                            "session_id": session_id,
                            "session_index": session_index,
                            "session_time": parse_time(session.session_time, TIME_FORMATS),
                            "step": period.index,
                            "turn_id": f"{session_id}_{k + 1}",
                            "turn_index": k,
                            "role": role,
                            "speaker": user_name if role == "user" else "assistant",
                            "content": message["content"],
                            "has_evidence": role == "user" and bool(exposed),
                        }
                    )
                session_index += 1
        for question in user.questions:
            j = question.index
            order = option_order(seed, user.id, j, len(question.choices), shuffle)
            options = [question.choices[i].answer for i in order]
            for period in user.periods:
                p = period.index
                gold = order.index(gold_choice(question, period))
                evidence = [
                    sid
                    for ep, sid, names in exposures
                    if ep <= p and names & set(question.required_info)
                ]
                meta = {
                    "period": p,
                    "qa_index": j,
                    "required_info": question.required_info,
                    "gold_state": true_state(question, period),
                    "state": period.state,
                    "option_states": [question.choices[i].state for i in order],
                    "option_types": [question.choices[i].type for i in order],
                    "original_index": order,
                }
                questions.append(
                    {
                        "benchmark": BENCHMARK,
                        "dataset": BENCHMARK,
                        "episode_id": user.id,
                        "question_id": question_id(user.id, p, j),
                        "split": "test",
                        "question": question.query,
                        "answer": options[gold],
                        "question_type": "multiple-choice",
                        "question_time": parse_time(period.period_end, TIME_FORMATS)
                        if period.period_end
                        else "",
                        "options": options,
                        "gold_option": gold,
                        "evidence_ids": evidence,
                        "checkpoint": p,
                        "lang": "en",
                        "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True),
                    }
                )
    return Prepared(
        pd.DataFrame(sessions, columns=SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
    )


def question_id(user_id: str, period: int, question_index: int) -> str:
    """``{user}_p{period}_q{j}``: one question asked at one period's checkpoint."""
    return f"{user_id}_p{period}_q{question_index}"
