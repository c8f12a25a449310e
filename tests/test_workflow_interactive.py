"""The interactive protocols in the workflow on a tiny AMemGym environment (offline backend):
the dialogues rule chains step k-1 -> k, replay reads the source system's transcripts, and a
real run writes dialogues, snapshots, checkpoint / recall replies and the upper bound."""

import pandas as pd
import pytest

from tests.amemgym_fixtures import TINY_BENCHMARK, environment_workdir
from tests.workflow import snakemake

pytestmark = pytest.mark.slow

TINY = {
    "models": {"embedder": {"backend": "offline"}},
    "run": {"benchmarks": ["amemgym_tiny"], "systems": ["native", "rag"]},
    "benchmarks": {
        "amemgym_tiny": {
            **TINY_BENCHMARK,
            "protocols": ["interactive", "interactive_replay"],
            "interactive": {"off_policy_source": "native", "num_rounds_update": 2},
        }
    },
}
SHARD = "results/amemgym_tiny/{system}/{protocol}/step{step}/shard0"


def blocks(log: str, rule: str) -> dict[str, str]:
    """Planned jobs of ``rule``: first output path -> the job's block of the dry-run log."""
    out = {}
    for block in log.split(f"rule {rule}:")[1:]:
        output = block.split("output: ")[1].split(",")[0].split("\n")[0].strip()
        out[output] = block.split("\n\n")[0]
    return out


def test_dry_run_chains_dialogues_step_k_minus_1_to_k_and_replay_reads_the_source(tmp_path):
    wd, override = environment_workdir(tmp_path, TINY)
    log = snakemake(wd, "--dry-run", configfiles=[override])
    dialogues = blocks(log, "dialogues")
    # 2 systems x 3 periods, one shard
    assert len(dialogues) == 6
    step1 = dialogues[
        SHARD.format(system="rag", protocol="interactive", step=1) + "/dialogues.parquet"
    ]
    inputs = step1.split("output:")[0]
    assert SHARD.format(system="rag", protocol="interactive", step=0) + "/memory" in inputs
    step0 = dialogues[
        SHARD.format(system="rag", protocol="interactive", step=0) + "/dialogues.parquet"
    ]
    assert "/memory" not in step0.split("output:")[0]  # period 0 starts from nothing
    replays = blocks(log, "replay_dialogues")
    assert len(replays) == 6
    replay = replays[
        SHARD.format(system="rag", protocol="interactive_replay", step=2) + "/dialogues.parquet"
    ].split("output:")[0]
    assert (
        SHARD.format(system="native", protocol="interactive", step=2) + "/dialogues.parquet"
        in replay
    )
    assert SHARD.format(system="rag", protocol="interactive_replay", step=1) + "/memory" in replay
    assert len(blocks(log, "upper_bound")) == 1  # once per benchmark, whatever the systems
    # one job scores all 2 systems x 2 protocols x 3 steps, each into its step's folder
    (scoring,) = blocks(log, "score_interactive").values()
    outputs = scoring.split("output:")[1].split("\n")[0]
    assert outputs.count("/scores.parquet") == 12
    assert "rule summarize:" in log


def test_real_run_with_the_offline_backend_reaches_the_summary(tmp_path):
    wd, override = environment_workdir(tmp_path, TINY)
    snakemake(wd, configfiles=[override])

    def shard(system, protocol, step, name):
        folder = SHARD.format(system=system, protocol=protocol, step=step)
        return pd.read_parquet(wd / folder / name)

    native = shard("native", "interactive", 1, "dialogues.parquet")
    own = shard("rag", "interactive", 1, "dialogues.parquet")
    replay = shard("rag", "interactive_replay", 1, "dialogues.parquet")
    # period 1: 2 users x 2 sessions x 2 rounds x 2 turns
    assert len(native) == len(own) == len(replay) == 16
    assert replay.content.tolist() == native.content.tolist()
    assert set(replay.source) == {"replayed"} and set(own.source) == {"generated"}
    replies = shard("rag", "interactive", 1, "checkpoint_replies.parquet")
    assert len(replies) == 4 and replies.parse_ok.all()
    upper = pd.read_parquet(wd / "results/amemgym_tiny/upper_bound.parquet")
    assert len(upper) == 16  # 2 users x 2 questions x 4 options
    ledger = (wd / SHARD.format(system="rag", protocol="interactive", step=1)).joinpath(
        "dialogues.ledger.json"
    )
    assert '"checkpoint_parse_failures": 0' in ledger.read_text()

    summary = pd.read_parquet(wd / "results/summary.parquet")
    runs = summary[(summary["metric"] == "accuracy") & (summary["aggregate"] == "micro")]
    assert set(zip(runs.system, runs.protocol, runs.step, strict=True)) == {
        (s, p, k)
        for s in ("native", "rag")
        for p in ("interactive", "interactive_replay")
        for k in (0, 1, 2)
    }
    text = (wd / "results/summary.md").read_text()
    assert "## amemgym_tiny: overall accuracy per period" in text
    assert "## amemgym_tiny: memory score per period" in text
    assert "| rag | interactive_replay |" in text
    # the memory score's baselines come from the scorer's rows, beside it
    assert "## amemgym_tiny: random and upper bound per period" in text
    assert "| all | random |" in text and "| all | upper bound |" in text
    assert "| system | protocol | period 0 | period 1 | period 2 | mean | not meaningful |" in text
    baselines = summary[summary["metric"].isin(["random", "upper_bound", "upper_below_random"])]
    assert set(baselines["metric"]) == {"random", "upper_bound", "upper_below_random"}
    page = (wd / "results/report.html").read_text()
    assert "On- vs off-policy ranking" in page
    assert "Random and upper bound per period" in page
