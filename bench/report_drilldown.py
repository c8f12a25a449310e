"""Size and load time of the report's per-question drill-down at paper scale.

Generates one static QA run of N questions (LongMemEval-shaped texts: a question of ~12 words,
a short gold answer, a ~40-word answer, a judge reply, 10 retrieved turns of ~60 words out of a
history of 20 turns per question), builds the drill-down's records, writes its page and chunk,
and (with ``--browser``) opens the page in headless Chromium from file:// and times how long
the chunk takes to load and show its first page of rows, and how long a filter takes.

    python -m bench.report_drilldown --questions 5000 [--systems 2] [--browser]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

from mnemoflow.report.drilldown import DrillFrames, drilldown, write_drilldown

WORDS = (
    "memory assistant recipe travel budget garden weekend concert library project deadline "
    "doctor appointment coffee bicycle museum painting language lesson apartment rent "
    "birthday gift hiking trail running shoes podcast episode chess opening vacation"
).split()
RUN = {"benchmark": "longmemeval_s", "protocol": "qa", "step": 0}


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def frames(questions: int, systems: int, seed: int = 0) -> DrillFrames:
    rng = random.Random(seed)
    turns = [f"q{i}_t{k}" for i in range(questions) for k in range(20)]
    sessions = pd.DataFrame(
        {
            "benchmark": RUN["benchmark"],
            "session_id": [t.rsplit("_", 1)[0] for t in turns],
            "turn_id": turns,
            "turn_index": [int(t.rsplit("_t", 1)[1]) for t in turns],
            "role": "user",
            "speaker": "user",
            "content": [_text(rng, 60) for _ in turns],
        }
    )
    ids = [f"q{i}" for i in range(questions)]
    qs = pd.DataFrame(
        {
            "benchmark": RUN["benchmark"],
            "question_id": ids,
            "question": [_text(rng, 12) + "?" for _ in ids],
            "answer": [_text(rng, 3) for _ in ids],
            "evidence_ids": [[f"{q}_t3"] for q in ids],
        }
    )
    answers, judgements = [], []
    for s in range(systems):
        for i, q in enumerate(ids):
            answers.append(
                {**RUN, "system": f"system{s}", "episode_id": q, "question_id": q}
                | {"question_type": ["single-session-user", "multi-session"][i % 2]}
                | {
                    "response": _text(rng, 40),
                    "retrieved_ids": rng.sample(turns[i * 20 :][:20], 10),
                }
                | {"context_tokens": 900, "model": "gpt-4o-mini", "cache_hit": False}
                | {"tokens_in": 1200, "tokens_out": 60, "latency_s": 0.8}
            )
            judgements.append(
                {**RUN, "system": f"system{s}", "question_id": q, "question_type": "x"}
                | {"judge": "gpt-4o/lme-v1", "metric": "accuracy", "value": float(i % 2)}
                | {"raw_reply": "yes" if i % 2 else "no", "parse_ok": True}
            )
    return DrillFrames(
        answers=pd.DataFrame(answers),
        judgements=pd.DataFrame(judgements),
        questions=qs,
        sessions=sessions,
    )


def browse(page: Path) -> dict[str, float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    options = Options()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        start = time.perf_counter()
        driver.get(page.as_uri())
        count = driver.find_element(By.ID, "count")
        WebDriverWait(driver, 120).until(lambda d: count.text.endswith(" questions"))
        loaded = time.perf_counter() - start
        before = count.text
        start = time.perf_counter()
        Select(driver.find_element(By.ID, "outcome")).select_by_value("correct")
        WebDriverWait(driver, 60).until(lambda d: count.text != before)
        filtered = time.perf_counter() - start
        return {"page and first chunk shown (s)": loaded, "outcome filter (s)": filtered}
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=5000)
    parser.add_argument("--systems", type=int, default=2)
    parser.add_argument("--browser", action="store_true")
    args = parser.parse_args()
    data_in = frames(args.questions, args.systems)
    start = time.perf_counter()
    data = drilldown(data_in, {"gpt-4o-mini": {"input": 0.15, "output": 0.6}})
    built = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        write_drilldown(data, folder)
        written = time.perf_counter() - start
        chunks = sorted((folder / "questions").glob("*.js"))
        print(f"{args.questions} questions x {args.systems} systems")
        print(f"records built in {built:.1f} s, written in {written:.1f} s")
        print(f"questions.html: {(folder / 'questions.html').stat().st_size:,} bytes")
        for chunk in chunks:
            print(f"{chunk.name}: {chunk.stat().st_size:,} bytes")
        if args.browser:
            for name, seconds in browse(folder / "questions.html").items():
                print(f"{name}: {seconds:.2f}")


if __name__ == "__main__":
    main()
