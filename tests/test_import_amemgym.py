"""An AMemGym eval-output as an imported system of the interactive protocol: the reference's
own folder (one folder per user) or mnemoflow's eval-output file, read by the dialogues step
instead of conversing, scored against the environment; the shipped sample re-scored to the
number its folder states; MemoryBench-Results folders as ``--format memorybench`` input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mnemoflow import cli
from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.errata import file_sha256
from mnemoflow.data.memorybench_results import run_predictions
from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError
from mnemoflow.eval import imported_amemgym as ia
from mnemoflow.eval.amemgym.amemgym_score import score_replies
from mnemoflow.eval.export import amemgym_eval_output
from mnemoflow.eval.imported import check_imported
from mnemoflow.memory.base import build
from mnemoflow.protocols import interactive as it
from mnemoflow.protocols.step import StepContext
from tests.amemgym_fixtures import answer, write_environment, write_reference

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def users(tmp_path):
    return read_environment(write_environment(tmp_path))


WRONG = {("ana", 1, 0), ("ben", 2, 1), ("ben", 0, 0)}
BROKEN = {("ana", 2, 1)}


def imported_spec(path: Path) -> dict:
    return {"type": "imported", "format": "amemgym", "path": str(path),
            "sha256": ia.output_sha256(path)}  # fmt: skip


def run_imported(users, spec, folder: Path, steps=3) -> list:
    results, previous = [], None
    for k in range(steps):
        keys = {"benchmark": "amemgym", "system": "pub", "protocol": it.PROTOCOL, "step": k}
        result = asyncio.run(
            it.run_step(users, k, StepContext(spec, None, keys), previous, folder / f"s{k}",
                        it.Schedule())
        )  # fmt: skip
        results.append(result)
        previous = folder / f"s{k}"
    return results


def test_the_dialogues_step_reads_the_reference_folder_and_scores_it(users, tmp_path):
    folder = write_reference(tmp_path / "out", users, WRONG, BROKEN)
    # no gateway at all: a model call would fail
    results = run_imported(users, imported_spec(folder), tmp_path / "snap")
    for k, result in enumerate(results):
        assert result.dialogues.empty and result.recall.empty
        assert len(result.replies) == 4  # 2 users x 2 questions at period k
        assert set(result.replies.period) == {k}
        assert set(result.replies.model) == {"imported:amemgym"}
        assert result.replies.option_order.map(list).tolist() == [[0, 1, 2, 3]] * 4
    replies = pd.concat([r.replies for r in results], ignore_index=True)
    scored, _ = score_replies(users, replies[it.SCORER_COLUMNS["replies"]])
    wrong = {(r.user_id, r.period, r.question_index) for r in scored.itertuples() if not r.correct}
    assert wrong == WRONG | BROKEN  # the unparseable reply is wrong, never a random option
    assert not scored.set_index(["user_id", "period", "question_index"]).loc[
        ("ana", 2, 1), "parse_ok"
    ]
    # the same number without the environment, from the folder alone; its own metric differs
    # by the one reply the reference scored as a random (here lucky) option
    assert ia.pooled(ia.strict_accuracy(folder)) == (scored.correct.mean(), 12)
    assert ia.pooled(ia.published_accuracy(folder)) == ((12 - 3) / 12, 12)


def test_mnemoflow_eval_output_file_reads_the_same(users, tmp_path):
    folder = write_reference(tmp_path / "out", users, WRONG, set())
    replies = ia.read_output(folder).replies
    path = tmp_path / "run.eval-output.json"  # what `mnemoflow export --format amemgym` writes
    path.write_text(json.dumps(amemgym_eval_output(users, replies, None)), "utf-8")
    results = run_imported(users, imported_spec(path), tmp_path / "snap")
    assert [len(r.replies) for r in results] == [4, 4, 4]
    read_back = ia.read_output(path).replies.sort_values(["user_id", "period", "question_index"])
    assert (
        read_back.reply.tolist()
        == replies.sort_values(["user_id", "period", "question_index"]).reply.tolist()
    )
    content = json.loads(path.read_text())
    content["zoe"] = content.pop("ben")
    path.write_text(json.dumps(content))
    with pytest.raises(ConfigError) as caught:
        ia.checked_against(ia.read_output(path), users)
    assert str(caught.value) == (
        f"{path}: user zoe overall_results[0][0]: user zoe is not in the benchmark's environment"
    )


def test_a_reply_the_output_does_not_have_is_unscored_not_left_out(users, tmp_path):
    """An interrupted reference run leaves a result null (not asked) or a period out: the
    question is still asked in the run, counted unscored (wrong in ``accuracy``, out of
    ``accuracy:scored``), so every system is scored on the environment's questions, not the
    imported one on fewer."""
    folder = write_reference(tmp_path / "out", users, set(), set())
    results = folder / "ana" / ia.RESULTS
    content = json.loads(results.read_text())
    content[1][0] = None
    results.write_text(json.dumps(content[:2]))  # and no period 2
    replies = pd.concat(
        [r.replies for r in run_imported(users, imported_spec(folder), tmp_path / "snap")],
        ignore_index=True,
    )
    assert len(replies) == 12  # 2 users x 3 periods x 2 questions, as a native run asks
    missing = replies[~replies.parse_ok]
    keys = missing[["user_id", "period", "question_index"]].itertuples(index=False, name=None)
    assert sorted(keys) == [("ana", 1, 0), ("ana", 2, 0), ("ana", 2, 1)]
    _, per_period = score_replies(users, replies[it.SCORER_COLUMNS["replies"]])
    rows = per_period.set_index(["period", "metric"])
    assert rows.loc[(1, "accuracy"), ["value", "n"]].tolist() == [0.75, 4]
    assert rows.loc[(2, "accuracy:unscored"), "value"] == 2


def test_bad_output_is_one_line_naming_file_record_and_field(users, tmp_path):
    folder = write_reference(tmp_path / "out", users, set(), set())
    results = folder / "ana" / ia.RESULTS
    content = json.loads(results.read_text())
    del content[1][0]["raw_response"]
    results.write_text(json.dumps(content))
    with pytest.raises(ConfigError) as caught:
        ia.read_output(folder)
    assert str(caught.value) == f"{results} overall_results[1][0]: missing field 'raw_response'"
    content[1][0]["raw_response"] = answer(1)
    results.write_text(json.dumps([*content, content[0]]))  # a period the user does not have
    with pytest.raises(ConfigError) as caught:
        ia.checked_against(ia.read_output(folder), users)
    assert str(caught.value) == f"{results} overall_results[3][0]: user ana has 3 periods"
    results.write_text(json.dumps(content))
    (folder / "zoe").mkdir()
    (folder / "zoe" / ia.RESULTS).write_text(json.dumps(content))
    with pytest.raises(ConfigError, match=r"zoe/overall_results.json overall_results\[0\]\[0\]: "):
        ia.checked_against(ia.read_output(folder), users)
    with pytest.raises(ConfigError, match=r"no <user id>/overall_results.json"):
        ia.read_output(tmp_path / "empty")
    # a changed folder no longer has the config's sha256; the workflow refuses at start
    spec = {**imported_spec(folder), "sha256": "0" * 64}
    with pytest.raises(ConfigError, match=r"^config systems.pub.sha256: .* the config says 0+$"):
        check_imported({"pub": spec}, ["pub"], ["interactive"], "config benchmarks.amem")
    with pytest.raises(ConfigError, match=r"answers the interactive protocol only, not \['qa'\]"):
        check_imported({"pub": imported_spec(folder)}, ["pub"], ["qa"], "config benchmarks.b")
    with pytest.raises(ConfigError, match=r"not \['interactive_replay'\]"):
        check_imported(
            {"pub": imported_spec(folder)}, ["pub"], ["interactive_replay"], "config benchmarks.b"
        )


def test_import_of_a_reference_folder_writes_the_layer_and_states_its_numbers(
    users, tmp_path, capsys
):
    folder = write_reference(tmp_path / "native", users, WRONG, BROKEN)
    out = tmp_path / "import.yaml"
    argv = ["import", "--format", "amemgym", str(folder), "--name", "pub"]
    assert cli.main([*argv, "--benchmark", "amemgym", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "pub: 12 answers of" in printed
    assert "the folder's own overall_metrics: accuracy 0.7500 over 12" in printed
    assert "its replies re-parsed strictly: accuracy 0.6667 over 12" in printed
    layer = yaml.safe_load(out.read_text())
    assert layer["systems"]["pub"] == imported_spec(folder)
    assert layer["benchmarks"] == {"amemgym": {"systems": ["pub"]}}
    build(layer["systems"]["pub"])  # a valid systems: entry
    check_imported(layer["systems"], ["pub"], ["interactive"], "config benchmarks.amemgym")


#: The shipped sample (data/imported/README.md): one user of a published AMemGym eval-output.
SAMPLE = REPO / "data/imported/amemgym_multilingual_native"
SAMPLE_USER = "1aed28fb83da4c7486ad72937c41165d"
SAMPLE_SHA256 = {
    "overall_results.json": "d6ddc635fcfbc7dc538aabee4e6e49719652c94920ada7e04e8684f1cd7e94f8",
    "overall_metrics.json": "587ed0540be32bde20112133ef0508623f563838492597b7598b36ed3150a181",
}


def test_the_shipped_sample_re_scores_to_the_accuracy_its_folder_states():
    user = SAMPLE / SAMPLE_USER
    for name, sha in SAMPLE_SHA256.items():
        assert file_sha256(user / name) == sha, name  # pinned: byte-for-byte copies
    published = ia.published_accuracy(SAMPLE)
    strict = ia.strict_accuracy(SAMPLE)
    assert len(published[SAMPLE_USER]) == len(strict[SAMPLE_USER]) == 110  # 11 periods x 10
    assert round(ia.pooled(published)[0], 4) == 0.4273  # 47 of 110
    assert strict == published  # every reply re-parses to the choice its authors scored
    assert len(ia.read_output(SAMPLE).replies) == 110


# ---- MemoryBench-Results folders ---------------------------------------------------------------


def write_results(root: Path) -> Path:
    runs = [("r1", "bm25_message"), ("r2", "wo_memory")]
    lines = []
    for run, baseline in runs:
        relative = f"off-policy/domain/Open-Domain/{baseline}/{run}"
        (root / relative).mkdir(parents=True)
        predict = [{"test_idx": 0, "dataset": "JRE-L", "response": f"{baseline} says"}]
        (root / relative / "predict.json").write_text(json.dumps(predict), "utf-8")
        summary = {"summary": {"average": 0.41, "per_dataset": {"JRE-L": 0.4}}}
        (root / relative / "summary.json").write_text(json.dumps(summary), "utf-8")
        lines.append(
            json.dumps(
                {"exp": "off-policy", "model": "Qwen3-8B", "dataset_type": "domain",
                 "set_name": "Open-Domain", "baseline": baseline, "run_id": run,
                 "relative_dir": relative, "files": ["summary.json", "predict.json"]}
            )
        )  # fmt: skip
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    return root


def test_a_memorybench_results_folder_names_its_runs_predictions(tmp_path, capsys):
    root = write_results(tmp_path / "release")
    path, entry = run_predictions(root, "r2")
    assert path == root / "off-policy/domain/Open-Domain/wo_memory/r2/predict.json"
    assert entry["baseline"] == "wo_memory" and entry["summary"] == {"average": 0.41}
    assert run_predictions(path.parent)[0] == path  # one run's folder
    with pytest.raises(DataError, match=r"manifest.jsonl: 2 runs have predict.json; name one"):
        run_predictions(root)
    with pytest.raises(DataError, match=r"manifest.jsonl: no run 'r9' with predict.json"):
        run_predictions(root, "r9")
    path.unlink()
    with pytest.raises(DataError, match=r"r2/predict.json: run 'r2' lists predict.json but it"):
        run_predictions(root, "r2")

    out = tmp_path / "import.yaml"
    argv = ["import", "--format", "memorybench", str(root), "--run", "r1", "--name", "bm25_pub"]
    assert cli.main([*argv, "--benchmark", "mb", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "bm25_pub: 1 answers of" in printed
    assert "MemoryBench-Results run 'r1': its summary average=0.41" in printed
    entry = yaml.safe_load(out.read_text())["systems"]["bm25_pub"]
    chosen = root / "off-policy/domain/Open-Domain/bm25_message/r1/predict.json"
    assert entry == {"type": "imported", "format": "memorybench", "path": str(chosen),
                     "sha256": file_sha256(chosen)}  # fmt: skip


def test_score_reads_the_reference_folder_as_eval_output(users, tmp_path, capsys):
    folder = write_reference(tmp_path / "native", users, WRONG, BROKEN)
    out = tmp_path / "scored"
    argv = ["score", "--benchmark", "amemgym", "--data", str(tmp_path / "data.json")]
    assert cli.main([*argv, "--eval-output", str(folder), "--out", str(out)]) == 0
    assert "scored 12 replies of 2 users" in capsys.readouterr().out
    scores = pd.read_parquet(out / "question_scores.parquet")
    assert scores.correct.sum() == 8 and (~scores.parse_ok).sum() == 1
    # a null result (not asked) is scored as the workflow scores it: unscored, never left out
    results = folder / "ben" / ia.RESULTS
    content = json.loads(results.read_text())
    content[0][1] = None
    results.write_text(json.dumps(content))
    assert cli.main([*argv, "--eval-output", str(folder), "--out", str(out)]) == 0
    assert "scored 12 replies of 2 users" in capsys.readouterr().out
    scores = pd.read_parquet(out / "question_scores.parquet")
    assert (~scores.parse_ok).sum() == 2


def test_the_plan_counts_no_call_for_an_imported_system(tmp_path):
    from mnemoflow.planning.run import plan_run

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["models"]["embedder"] = {"backend": "offline"}
    config["run"] = {"benchmarks": ["amemgym_procedural"], "systems": ["pub", "native"]}
    config["benchmarks"]["amemgym_procedural"]["generate"] = {"users": 2, "periods": 1, "seed": 7}
    config["systems"]["pub"] = {"type": "imported", "format": "amemgym", "path": "x",
                                "sha256": "0" * 64}  # fmt: skip
    wc = {"benchmark": "amemgym_procedural", "protocol": "interactive", "shard": "0"}
    jobs = [("dialogues", {**wc, "system": s, "step": str(k)}) for s in ("pub", "native")
            for k in (0, 1)]  # fmt: skip
    plan = plan_run(config, tmp_path, jobs, model_rules=("dialogues",))
    systems = {r["system"] for r in plan.to_dict()["runs"]}
    assert systems == {"native"} and not plan.unplanned


def test_an_imported_system_is_no_replay_source():
    from mnemoflow.planning.grid import check_run

    spec = {"loader": "amemgym", "protocols": ["interactive", "interactive_replay"],
            "interactive": {"off_policy_source": "pub"}, "systems": ["native"]}  # fmt: skip
    config = {
        "run": {"benchmarks": ["amem"], "systems": ["native"]},
        "systems": {"native": {"type": "none"}, "pub": {"type": "imported", "format": "amemgym"}},
    }
    with pytest.raises(ConfigError) as caught:
        check_run(config, {"amem": spec})
    assert str(caught.value) == (
        "config benchmarks.amem.interactive.off_policy_source: 'pub' is imported: its file "
        "holds no transcripts to replay"
    )


def test_a_shard_reads_its_users_and_the_job_checks_every_user(users, tmp_path):
    folder = write_reference(tmp_path / "out", users, WRONG, set())
    spec = imported_spec(folder)
    ben = [u for u in users if u.id == "ben"]
    output = it.imported_output(spec, ben, "config systems.pub")
    assert set(output.replies.user_id) == {"ben"} and len(output.replies) == 6
    result = run_imported(ben, spec, tmp_path / "snap", steps=1)[0]
    assert set(result.replies.user_id) == {"ben"}
    with pytest.raises(ConfigError, match=r"ana/overall_results.json overall_results\[0\]\[0\]: "):
        it.imported_output(spec, ben, "config systems.pub", shard=False)  # ana: not in them
    assert it.imported_output({"type": "rag"}, ben, "config systems.rag") is None
