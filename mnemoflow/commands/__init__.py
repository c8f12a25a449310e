"""The ``mnemoflow`` sub-commands, one module each.

A command module registers its ``register(parser)`` (adds its arguments to the command's own
parser, sets ``func``) with ``@COMMANDS.register(NAME, help=...)``: the name and the sub-parser's
options are stated once, there. Adding a command means adding one module and naming it here.
"""

from __future__ import annotations

from mnemoflow.registry import Registry

COMMANDS = Registry(
    "command",
    builtin_modules=[
        "mnemoflow.commands.run",
        "mnemoflow.commands.generate",
        "mnemoflow.commands.report",
        "mnemoflow.commands.data",
        "mnemoflow.commands.score",
        "mnemoflow.commands.normalize",
        "mnemoflow.commands.cluster",
        "mnemoflow.commands.serve",
        "mnemoflow.commands.metric",
        "mnemoflow.commands.cache",
        "mnemoflow.commands.batch",
        "mnemoflow.commands.compare",
        "mnemoflow.commands.export",
        "mnemoflow.commands.importer",
        "mnemoflow.commands.plan",
        "mnemoflow.commands.verify",
        "mnemoflow.commands.reparse",
    ],
)
