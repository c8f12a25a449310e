"""The offline backend's scores reflect retrieval quality (issue: 'scores differ meaningfully')."""

import asyncio

from mnemoflow.data.registry import load_benchmark, n_steps
from mnemoflow.llm.gateway import Gateway
from mnemoflow.protocols import static_qa as qa

SPEC = {"loader": "synthetic", "params": {"users": 4, "periods": 2, "seed": 11}}
SYSTEMS = {
    "none": {"type": "none"},
    "full_context": {"type": "full_context", "max_tokens": 4000},
    "bm25_message": {"type": "bm25_message", "top_k": 5},
    "bm25_session": {"type": "bm25_session", "top_k": 2},
}


def _accuracy(name, tmp_path):
    prepared = load_benchmark(SPEC)
    gateway = Gateway.from_config({}, None)
    episodes = sorted(prepared.questions.episode_id.unique())

    async def run():
        previous, frames = None, []
        for step in range(n_steps(SPEC)):
            out = tmp_path / name / f"step{step}"
            await qa.ingest(
                prepared.sessions,
                prepared.episode_sessions,
                episodes,
                SYSTEMS[name],
                step,
                previous,
                out,
                gateway,
            )
            questions = prepared.questions[prepared.questions.checkpoint == step]
            keys = qa.run_keys("synthetic", name, step)
            answers = await qa.answer(questions, out, SYSTEMS[name], keys, gateway)
            frames.append(await qa.judge(answers, questions, gateway))
            previous = out
        return frames

    judgements = asyncio.run(run())
    import pandas as pd

    merged = pd.concat(judgements)
    assert merged.parse_ok.all()
    return float(merged.value.mean())


def test_memory_systems_beat_no_memory(tmp_path):
    scores = {name: _accuracy(name, tmp_path) for name in SYSTEMS}
    assert scores["none"] < 0.3
    for name in ("bm25_message", "bm25_session", "full_context"):
        assert scores[name] > scores["none"] + 0.3, scores


def test_shards_partition_episodes():
    episodes = [f"e{i}" for i in range(7)]
    shards = [qa.shard_episodes(episodes, s, 3) for s in range(3)]
    assert sorted(sum(shards, [])) == sorted(episodes)
    assert [len(s) for s in shards] == [3, 2, 2]
