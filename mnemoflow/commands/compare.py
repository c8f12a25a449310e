"""``mnemoflow compare``: a run against the published numbers, or against another run.

    mnemoflow compare RESULTS --published PAPER[/TABLE] [--map OURS=THEIRS ...] [--benchmark B]
    mnemoflow compare RESULTS --preset NAME          # configs/paper/NAME.yaml (issue 21 item 1)
    mnemoflow compare RESULTS_A RESULTS_B            # two runs: B against A
    mnemoflow compare RESULTS --paired               # systems of one run, paired tests
    mnemoflow compare RESULTS --versions             # scored as released and with its errata

RESULTS is a results folder (``summary.parquet`` and the per-item ``question_scores.parquet``
under it) or a ``summary.parquet``. Prints Markdown; ``--out DIR`` also writes ``compare.md``
and the tables as TSV. See docs/reproduce.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from mnemoflow.commands import COMMANDS
from mnemoflow.data.memorybench_results import read_results
from mnemoflow.data.published import PUBLISHED_DIR, load_published, select_published
from mnemoflow.data.tables import empty, read_table
from mnemoflow.errors import ConfigError
from mnemoflow.eval.export import loader_of
from mnemoflow.eval.static_qa.data_versions import corrected_gold, score_versions
from mnemoflow.eval.static_qa.judges import judge_answers
from mnemoflow.llm.gateway import Gateway
from mnemoflow.report.compare import (
    check_pairs,
    compare_published,
    compare_runs,
    load_run,
    markdown_table,
    paired_systems,
    unpaired_rows,
)
from mnemoflow.report.reproduction import published_as, run_pairs, unpaired_reasons
from mnemoflow.report.summaries import last_step
from mnemoflow.report.unpublished import check_spec, section_lines, unpublished_section

PRESETS_DIR = Path(__file__).resolve().parents[2] / "configs" / "paper"


@COMMANDS.register(
    "compare", help="a run against the published numbers (CIs, Kendall tau), or two runs"
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="results folder (or its summary.parquet)")
    parser.add_argument(
        "results_b", type=Path, nargs="?", help="a second run: compare it against the first"
    )
    add_published_arguments(parser)
    parser.add_argument(
        "--paired", action="store_true", help="paired tests between the systems of RESULTS"
    )
    parser.add_argument(
        "--versions",
        action="store_true",
        help="score RESULTS on each data version it records: as released and with its errata "
        "overlay (benchmarks with errata: FILE)",
    )
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="with --versions: judge the corrected questions' answers against their new gold, "
        "with the run's judge (offline, or models.judge of --judge-config)",
    )
    parser.add_argument(
        "--judge-config",
        type=Path,
        help="a config whose models.judge is the judge that judged the run (for --rejudge)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="list every published cell (also those the run has no value for) / every step",
    )
    parser.add_argument("--out", type=Path, help="write compare.md and the tables as TSV here")
    parser.set_defaults(func=run)


def add_published_arguments(parser: argparse.ArgumentParser, config: bool = True) -> None:
    """The options naming published tables and pairing our systems with their rows (shared
    with ``mnemoflow report``, whose own ``--config`` is the run's config: ``config=False``)."""
    parser.add_argument(
        "--published", help="PAPER or PAPER/TABLE of data/published (comma-separated for several)"
    )
    parser.add_argument(
        "--preset", help="NAME of configs/paper/NAME.yaml: its compare.published and published_as"
    )
    parser.add_argument("--presets", type=Path, default=PRESETS_DIR, help=argparse.SUPPRESS)
    parser.add_argument(
        "--published-dir",
        type=Path,
        default=PUBLISHED_DIR,
        help="folder (or one CSV) of published numbers (default: data/published)",
    )
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="OURS=THEIRS",
        help="pair our system OURS with the published row THEIRS (repeatable)",
    )
    parser.add_argument(
        "--memorybench-results",
        type=Path,
        help="a local copy of THUIR/MemoryBench-Results (manifest.jsonl): its summaries join the "
        "published rows as paper memorybench-results",
    )
    parser.add_argument("--benchmark", help="our benchmark name for the published rows")
    if config:
        parser.add_argument(
            "--config", type=Path, help="the run's config: its systems' published_as pair them"
        )


def _preset_pairs(args: argparse.Namespace, run):
    """(the preset, its pairs of the systems the run has, and the reason each paper row has no
    counterpart: the preset's ``compare.unpaired`` and its systems the run left out)."""
    preset = read_preset(args.preset, args.presets)
    pairs, reasons = run_pairs(preset.pairs, preset.unpaired, set(run.summary["system"]))
    return preset, list(pairs), dict(reasons)


def published_comparison(args: argparse.Namespace, run) -> tuple[str, tuple]:
    """(the published filter, (cells, taus, ranks)) for ``--published`` or ``--preset``."""
    if args.published and args.preset:
        raise ConfigError("--published and --preset both name the tables; give one")
    pairs, benchmark, spec = _pairs(args.map), args.benchmark, args.published
    reasons: dict[str, str] = {}
    if args.config is not None:
        try:
            config = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{args.config}: not valid YAML: {exc}") from exc
        pairs = published_as(config) + pairs
    if args.preset:
        preset, preset_pairs, reasons = _preset_pairs(args, run)
        if preset.published is None:
            raise ConfigError(
                f"{preset.path}: the paper's numbers are not shipped "
                f"({' '.join(preset.compare['missing'].split())}); `mnemoflow compare RESULTS "
                f"--preset {args.preset}` lists ours, each with the reason"
            )
        spec, benchmark = preset.published, benchmark or preset.benchmark
        pairs = preset_pairs + pairs
    published = load_published(args.published_dir)
    if args.memorybench_results is not None:
        published = pd.concat(
            [published, read_results(args.memorybench_results)], ignore_index=True
        )
    published = select_published(published, spec)
    return spec, compare_published(run, published, pairs, benchmark, reasons)


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        ours, sep, theirs = item.partition("=")
        if not sep or not ours or not theirs:
            raise ConfigError(f"--map {item!r}: expected OURS=THEIRS")
        pairs.append((ours, theirs))
    return pairs


@dataclass(frozen=True)
class Preset:
    """What ``configs/paper/NAME.yaml`` compares with: ``published`` (PAPER[/TABLE],...; None when
    the paper's numbers are not shipped: ``compare`` then says what it would be,
    ``mnemoflow.report.unpublished``), the ``published_as`` pairs, ``compare.benchmark`` and the
    ``compare.unpaired`` (row, reason) pairs."""

    path: Path
    published: str | None
    pairs: list[tuple[str, str]]
    benchmark: str | None
    unpaired: tuple[tuple[str, str], ...]
    compare: dict


def read_preset(name: str, presets: Path) -> Preset:
    """The comparison ``configs/paper/NAME.yaml`` asks for (:class:`Preset`)."""
    path = presets / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in presets.glob("*.yaml")) if presets.is_dir() else []
        raise ConfigError(
            f"{path}: no such preset (known: {', '.join(known) or 'none yet'}); "
            "use --published PAPER[/TABLE] and --map OURS=THEIRS instead"
        )
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    compare = config.get("compare") or {}
    published = compare.get("published")
    if published is None and "published" in compare:
        check_spec(compare, str(path))
    elif not isinstance(published, str) or not published:
        raise ConfigError(f"{path}: compare.published must name PAPER[/TABLE] (or be null)")
    return Preset(
        path,
        published,
        published_as(config),
        compare.get("benchmark"),
        unpaired_reasons(config),
        dict(compare),
    )


def unpublished_preset(args: argparse.Namespace, run) -> tuple[Preset, dict[str, pd.DataFrame]]:
    """(the preset, its section: our ``cells`` and the ``plotted`` rows alone) of ``--preset``
    whose paper published no numbers (shared with ``mnemoflow report``)."""
    preset, pairs, reasons = _preset_pairs(args, run)
    mapped = _pairs(args.map)
    check_pairs(mapped, set(run.summary["system"]))  # as compare_published checks them
    pairs += mapped
    every_step = bool(getattr(args, "all", False))
    return preset, unpublished_section(run, preset.compare, pairs, reasons, every_step)


def versions_section(root: Path, models: dict | None = None) -> tuple[list[str], pd.DataFrame]:
    """The run scored on the released data and with each benchmark's errata overlay
    (``mnemoflow.eval.static_qa.data_versions``), from ``{benchmark}/prepared/`` and the static QA
    shards; with ``models`` (``--rejudge``) the corrected questions are judged again
    (:func:`rejudge`)."""
    lines: list[str] = [f"# {root}: scored on each data version", ""]
    frames = []
    for path in sorted(root.glob("*/prepared/data_version.json")):
        version = json.loads(path.read_text(encoding="utf-8"))
        errata = version.get("errata")
        if not errata:
            continue
        bench = path.parent.parent
        questions = read_table(path.parent / "questions.parquet", "questions")
        answers = _shards(bench, "answers")
        judgements = _shards(bench, "judgements")
        rejudged = (
            None if models is None else rejudge(bench, questions, answers, judgements, models)
        )
        frame = score_versions(
            questions,
            answers,
            judgements,
            recall=loader_of(root, bench.name) == "locomo",
            rejudged=rejudged,
        )
        counts = ", ".join(f"{n} {action}" for action, n in errata["counts"].items())
        lines += [
            f"## {bench.name}",
            "",
            f"Data version `{version['id']}`: the released file, and overlay `{errata['name']}` "
            f"({counts}; {errata['source']}). `corrected` leaves dropped questions out, re-scores "
            "F1 and evidence recall against the corrected gold, and leaves out judged verdicts of "
            "corrected questions, counted in `rejudge` (they need a judge call on the new gold)"
            + (
                "; with --rejudge, the run's judge judged them again (counted in `rescored`)."
                if models is not None
                else "."
            ),
            "",
            markdown_table(frame) if len(frame) else "No judged static QA answers.",
            "",
        ]
        frames.append(frame)
    if not frames:
        raise ConfigError(
            f"compare --versions: no benchmark under {root} records an errata overlay "
            "(its prepared/data_version.json); name one with errata: FILE in the config"
        )
    return lines, pd.concat(frames, ignore_index=True)


def _judge_models(path: Path | None) -> dict:
    from mnemoflow.commands.score import _config

    return _config(path)[0]


def rejudge(
    bench: Path, questions: pd.DataFrame, answers: pd.DataFrame, judgements: pd.DataFrame, models
) -> pd.DataFrame:
    """Judgements of the corrected questions' answers against their corrected gold, by the judge
    (model and prompt version), repeats and seeds that judged the run (its ``judge.json``); a
    different judge is refused, since its verdicts would not be comparable with the run's."""
    settings_files = sorted(bench.glob("*/qa/step*/shard*/judge.json"))
    if not settings_files:
        raise ConfigError(f"compare --rejudge: no judge.json under {bench}: nothing says its judge")
    settings = json.loads(settings_files[0].read_text(encoding="utf-8"))
    gold = corrected_gold(questions)
    todo = answers[answers["question_id"].isin(set(gold["question_id"]))]
    if todo.empty:
        return empty("judgements")
    gateway = Gateway.from_config(models)
    try:
        ran = gateway.model_name("judge") + "/" + str(settings["prompt_version"])
        if ran != settings["judge"]:
            raise ConfigError(
                f"compare --rejudge: the run was judged by {settings['judge']}, this would judge "
                f"with {ran}; bind models.judge in --judge-config to the run's judge"
            )
        return asyncio.run(_judge(gateway, settings, gold, todo))
    finally:
        gateway.close()


async def _judge(gateway, settings: dict, gold: pd.DataFrame, todo: pd.DataFrame):
    async with gateway:
        return await judge_answers(
            gateway,
            settings["benchmark"],
            gold,
            todo,
            repeats=int(settings.get("repeats", 1)),
            # one ask uses the endpoint's own seed (seeds [null]); N asks seeds seed..seed+N-1
            seed=int((settings.get("seeds") or [0])[0] or 0),
        )


def _shards(bench: Path, table: str) -> pd.DataFrame:
    """Every static QA shard's ``table`` of one benchmark (the schema's empty table if none)."""
    paths = sorted(bench.glob(f"*/qa/step*/shard*/{table}.parquet"))
    frames = [read_table(path, table) for path in paths]
    return pd.concat(frames, ignore_index=True) if frames else empty(table)


def _section(title: str, frame: pd.DataFrame, empty: str) -> list[str]:
    return [f"## {title}", "", markdown_table(frame) if len(frame) else empty, ""]


def run(args: argparse.Namespace) -> int:
    run_a = load_run(args.results)
    sections: list[str] = []
    tables: dict[str, pd.DataFrame] = {}
    if args.results_b is not None:
        if args.published or args.preset:
            raise ConfigError("compare: give a second run or --published / --preset, not both")
        cells, taus, ranks = compare_runs(run_a, load_run(args.results_b))
        outside = int((cells["outside"] == "yes").sum())
        sections += [
            f"# {args.results_b} against {args.results}",
            "",
            f"{len(cells)} shared summary rows; B's value outside A's 95 % interval in {outside}.",
            "",
        ]
        shown = cells if args.all else last_step(cells)
        sections += _section(
            "Values (diff = B - A)"
            + ("" if args.all else ", each run's last step (--all: every step)"),
            shown,
            "No summary row in common.",
        )
        sections += _section("Rank agreement (Kendall tau)", taus, "Fewer than two systems.")
        sections += _section("Rank changes (▲k: B ranks it k places higher)", ranks, "None.")
        tables.update(runs=cells, taus=taus, ranks=ranks)
    elif args.preset and read_preset(args.preset, args.presets).published is None:
        if args.published:
            raise ConfigError("--published and --preset both name the tables; give one")
        preset, section = unpublished_preset(args, run_a)
        what = f"{preset.compare['paper']}/{preset.compare['table']}"
        head = f"# {args.results} against {what}: no published numbers\n\n## Published vs ours"
        sections += section_lines(section["cells"], section["plotted"], preset.compare, head)
        tables.update(published=section["cells"], unpaired=section["plotted"])
    elif args.published or args.preset:
        spec, (cells, taus, ranks) = published_comparison(args, run_a)
        paired = cells[cells["ours"].notna()]
        outside = int((paired["outside"] == "yes").sum())
        with_ci = int((paired["outside"] != "").sum())
        sections += [
            f"# {args.results} against the published {spec}",
            "",
            f"{len(cells)} published cells; {len(paired)} paired with the run; the published value "
            f"lies outside our 95 % interval in {outside} of the {with_ci} with an interval.",
            "",
        ]
        shown = cells if args.all else paired
        sections += _section(
            "Published vs ours (diff = ours - published)",
            shown,
            "No published cell is paired with the run: name our systems with --map OURS=THEIRS.",
        )
        unpaired = unpaired_rows(cells)
        if len(unpaired):
            sections += _section("Published rows without a counterpart in the run", unpaired, "")
        tables["unpaired"] = unpaired
        sections += _section("Rank agreement (Kendall tau)", taus, "Fewer than two paired rows.")
        sections += _section(
            "Rank changes (▲k: we rank it k places higher than the paper)", ranks, "None."
        )
        tables.update(published=cells, taus=taus, ranks=ranks)
    elif not (args.paired or args.versions):
        raise ConfigError(
            "compare: give a second run, --published PAPER[/TABLE], --preset NAME, --paired "
            "or --versions"
        )
    if args.rejudge and not args.versions:
        raise ConfigError("compare: --rejudge goes with --versions")
    if args.versions:
        models = _judge_models(args.judge_config) if args.rejudge else None
        lines, frame = versions_section(run_a.root, models)
        sections += lines
        tables["versions"] = frame
    if args.paired:
        paired = paired_systems(run_a)
        sections += _section(
            f"Paired tests between the systems of {args.results} (last step, shared items; "
            "over clusters where items share one; significant: Holm-adjusted p_holm < 0.05 "
            "over the pairs of each metric)",
            paired,
            "No two systems scored the same items.",
        )
        tables["paired"] = paired
    text = "\n".join(sections).rstrip() + "\n"
    print(text, end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "compare.md").write_text(text, encoding="utf-8")
        for name, frame in tables.items():
            frame.to_csv(args.out / f"{name}.tsv", sep="\t", index=False)
    return 0
