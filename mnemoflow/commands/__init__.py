"""The ``mnemoflow`` sub-commands, one module each.

A command module registers its ``register(subparsers)`` (adds its parser, sets ``func``) with
``@COMMANDS.register(NAME)``; adding a command means adding one module and naming it here.
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
    ],
)
