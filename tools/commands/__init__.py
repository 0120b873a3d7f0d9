"""The ``stigmesh`` subcommands, one module each: ``add_arguments(parser)`` and ``main(args)``.

:mod:`tools.cli` is the table that names them; a command parses and reports,
and leaves the work to the rooms beside it (experiments, replay, bench, the
agent's and the world's own packages).
"""
