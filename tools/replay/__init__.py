"""``stigmesh replay``: measure and compare how beliefs converge, from a run directory's logs.

:mod:`~tools.replay.load` reads the run, :mod:`~tools.replay.metrics` measures it against
the ground truth, :mod:`~tools.replay.rerun` re-runs each agent's core on its recorded
inputs under another configuration, :mod:`~tools.replay.figures` and
:mod:`~tools.replay.report` write the report directory; :mod:`tools.commands.replay` is the
command.
"""
