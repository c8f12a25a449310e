"""A preset's ``requires_layers``: the config files it must be layered on, and in which order.

Snakemake deep-merges ``--configfile`` files in the order given, later keys winning. A preset
that adds to another file (an AMemGym paper preset goes on configs/reference/amemgym-released.yaml)
merged in the wrong order is not an error to the schema: the merged config is valid and describes
another experiment (the reference's systems and protocols instead of the preset's). So a preset
names the files that must come before it, in order, and the workflow checks the command line's
order when the Snakefile is parsed (``snakemake -n``, ``mnemoflow plan`` and ``run`` all refuse).

A required layer is a path relative to the repository root (``configs/reference/...``); a file
given on the command line is that layer when it is that file, or a copy ending in the same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from mnemoflow.errors import ConfigError

KEY = "requires_layers"


def required_layers(path: Path) -> list[str]:
    """The ``requires_layers`` of a config file (none: [])."""
    try:
        content: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []  # an unreadable file is Snakemake's error, with its own message
    layers = content.get(KEY) if isinstance(content, dict) else None
    if layers is None:
        return []
    if not isinstance(layers, list) or not all(isinstance(x, str) and x for x in layers):
        raise ConfigError(f"{path}: {KEY} must be a list of config file paths")
    return layers


def _is_layer(given: Path, layer: str, root: Path) -> bool:
    wanted = Path(layer)
    if given.resolve() == (root / wanted).resolve():
        return True
    return given.parts[-len(wanted.parts) :] == wanted.parts


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def check_layer_order(configfiles: Sequence[str | Path], root: str | Path) -> None:
    """Refuse, in one line naming the file, a ``--configfile`` list in which a file's
    ``requires_layers`` are missing or not before it in their order."""
    root = Path(root)
    given = [Path(f) for f in configfiles]
    for i, path in enumerate(given):
        layers = required_layers(path)
        if not layers:
            continue
        order = " ".join([*layers, _shown(path, root)])
        previous = -1
        for layer in layers:
            places = [j for j, other in enumerate(given) if _is_layer(other, layer, root)]
            if not places:
                raise ConfigError(
                    f"{_shown(path, root)}: {KEY}: {layer} is not among the config files; "
                    f"give --configfile {order} [your site file]"
                )
            if places[0] > i or places[0] < previous:
                shown = " ".join(_shown(g, root) for g in given)
                raise ConfigError(
                    f"{_shown(path, root)}: {KEY}: {layer} must come before it, in the order "
                    f"--configfile {order} [your site file] (given: {shown})"
                )
            previous = places[0]
