"""The workflow config against its JSON schema, with one line per error for people.

Snakemake's own ``validate`` prints the failed schema fragment and the instance over several
lines; this check runs first and names the key path instead, e.g.
``config models.agent.temperature: 'hot' is not of type 'number'``.

The names some keys accept belong to the package, not to the YAML: the judges to the judge
registry, the scorings to ``eval.benchmark_metric``, the feedback dialogue sources to the feedback
protocols. :func:`load_schema` fills them in (:func:`owned_enums`), so a judge registered in code
is accepted without editing the schema file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from mnemoflow.errors import ConfigError
from mnemoflow.eval.benchmark_metric import JUDGES, SCORINGS
from mnemoflow.prices import price_table
from mnemoflow.protocols.feedback import DIALOGUE_SOURCES, MOVED_STRUCTURED_OUTPUT

#: Where in the schema a benchmark entry's keys are.
BENCHMARK = ("properties", "benchmarks", "additionalProperties", "properties")


def owned_enums() -> dict[tuple[str, ...], list[str]]:
    """Schema node (a path of keys) -> the names it accepts, from their owners."""
    judges = JUDGES.names()
    return {
        (*BENCHMARK, "judge"): judges,
        ("properties", "judge", "properties", "panel", "items", "properties", "kind"): judges,
        (*BENCHMARK, "scoring"): list(SCORINGS),
        (*BENCHMARK, "feedback", "properties", "dialogues"): list(DIALOGUE_SOURCES),
    }


def load_schema(schema_path: str | Path) -> dict[str, Any]:
    """The config schema with the owners' names filled in as each owned node's ``enum``."""
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    for where, names in owned_enums().items():
        node = schema
        for key in where:
            node = node[key]
        node["enum"] = names
    return schema


def check_config(config: dict[str, Any], schema_path: str | Path) -> None:
    """Raise :class:`ConfigError` naming the key path of the most relevant schema violation."""
    check_moved(config)
    check_layers(config)
    schema = load_schema(schema_path)
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        price_table(config.get("prices"))  # each entry against the shipped table
        return
    key = ".".join(str(part) for part in error.absolute_path)
    message = " ".join(error.message.split())  # one line, whatever the value printed
    raise ConfigError(f"config {key}: {message}" if key else f"config: {message}")


def check_moved(config: dict[str, Any]) -> None:
    """Keys that moved: one line naming the new key (the schema would only call them unknown)."""
    report = config.get("report")
    if isinstance(report, dict) and "prices" in report:
        raise ConfigError(
            "config report.prices: moved to the top-level key prices "
            "({MODEL: {input, cached_input, output}}, USD per million tokens)"
        )
    for name, spec in (config.get("benchmarks") or {}).items():
        feedback = spec.get("feedback") if isinstance(spec, dict) else None
        if isinstance(feedback, dict) and "structured_output" in feedback:
            raise ConfigError(MOVED_STRUCTURED_OUTPUT.replace("<name>", str(name)))


def check_layers(config: dict[str, Any]) -> None:
    """A benchmark without ``loader`` is most often a layer given without the file it goes on
    (an AMemGym paper preset names ``amemgym_v1``, whose loader and reference settings come from
    configs/reference/amemgym-released.yaml, given first): say so, not only that it is missing."""
    for name, spec in (config.get("benchmarks") or {}).items():
        if isinstance(spec, dict) and "loader" not in spec:
            raise ConfigError(
                f"config benchmarks.{name}.loader: missing; a file that only adds to a benchmark "
                "goes after the one that defines it (AMemGym presets: "
                "configs/reference/amemgym-released.yaml first, docs/reproduce.md)"
            )


def read_config_file(path: str | Path) -> Any:
    """A YAML (or JSON) config file, or one line naming the file and where it is wrong: the line
    and column of a syntax error, the byte offset (and line) of a byte that is not UTF-8."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}: not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start:,} (line {line})"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(str(exc.problem or exc.context or "").split())
        raise ConfigError(f"{path}: {where}YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: YAML syntax error: {' '.join(str(exc).split())}") from None


def config_files(args: list[str], root: str | Path) -> tuple[Path, list[Path]]:
    """(the working directory, the ``--configfile``/``--configfiles`` files in order) of a
    Snakemake command line run in ``root``: ``--opt VALUE`` and ``--opt=VALUE`` alike."""
    root = Path(root)
    directory, files, taking = root, [], False
    for previous, arg in zip(["", *args], args, strict=False):
        name, _, value = arg.partition("=")
        if name in ("--directory", "-d") and value:
            directory = root / value
        elif previous in ("--directory", "-d"):
            directory = root / arg
        if arg.startswith("-"):
            taking = name in ("--configfile", "--configfiles")
            if taking and value:
                files.append(root / value)
        elif taking:
            files.append(root / arg)
    return directory, files


def check_config_files(args: list[str], root: str | Path) -> None:
    """The config files a Snakemake command line reads (:func:`config_files` and the working
    directory's ``config.yaml``), each read once before Snakemake starts: Snakemake's own message
    for a broken file names neither the file nor the line (``mnemoflow run`` and ``mnemoflow
    plan`` call this)."""
    directory, files = config_files(args, root)
    for path in [directory / "config.yaml", *files]:
        if path.is_file():  # a missing one: Snakemake's own message names it
            read_config_file(path)
