"""Experiments: scenarios run in lockstep or as real processes, sweeps, and the evidence.

:mod:`~tools.experiments.scenario` is a scenario, read from its file by
:mod:`~tools.experiments.scenario_file`; :mod:`~tools.experiments.schedule` its schedule as
the timed operations both runners execute;
:mod:`~tools.experiments.lockstep` runs one in virtual time and
:mod:`~tools.experiments.realrun` as real processes (with
:mod:`~tools.experiments.progress` on the terminal);
:mod:`~tools.experiments.measure` measures a run; :mod:`~tools.experiments.sweep`
runs a grid of them; :mod:`~tools.experiments.evidence` writes docs/evidence.md.
"""
