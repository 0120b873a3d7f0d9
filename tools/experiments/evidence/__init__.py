"""The evidence: issue 13's targets measured on the scenario suite,
``python -m tools.experiments.evidence [--quick] [--scheduler ADDR] [--fresh]``.

Runs every scene of ``scenarios/suite.toml`` in lockstep over its seeds and variants on
a Dask cluster (local by default, ``--scheduler ADDR`` for a real one), each scene once
as real processes; measures every run with ``tools.replay`` (each agent with its own
settings; the cameras' footprints and the target's visibility from the truth); writes
``docs/evidence.md``, ``docs/evidence.json``, the figures under ``docs/evidence/`` and the
README's evidence table (between its markers: every target on its worst scene). Numbers
are reported as measured, misses included; nothing here is tuned to pass.

One command regenerates everything; a run whose inputs and imported source files are
unchanged is taken from ``runs/evidence-cache/`` (:mod:`.jobs`), so after a change to the
report only the report is redrawn, and after a change to the agent every run is redone.

1. The targets, each met or missed, on its worst scene.
2. The suite: every scene and every metric on it.
3. Accuracy: error while held, holding a track, estimates outside the room, speed.
4. Consistency: NEES with each agent's own model; each robot's own pose; CI against naive fusion.
5. Liars: among several observers against the oracle; the only observer.
6. Search for a hidden target, sharing against not.
7. Network faults: burst loss, a partition.
8. Real processes against lockstep.
9. The kit as sold: the fault-free scenes without a gyro.

The package: :mod:`.plan` says which runs (jobs) there are, :mod:`.jobs` runs, measures
and caches them, :mod:`.stats`, :mod:`.figures` and :mod:`.report` are the tables'
statistics, the plots and the markdown; each experiment is a module (:mod:`.targets`,
:mod:`.scenes`, :mod:`.accuracy`, :mod:`.consistency`, :mod:`.liars`, :mod:`.search`,
:mod:`.faults`, :mod:`.modes`, :mod:`.gyro`) with ``section(results)``, registered in
:data:`.main.EXPERIMENTS`; the targets' numbers are :mod:`.limits`, the per-scene measures
they judge :mod:`.measures`.

:mod:`.compare` (``python -m tools.experiments.evidence.compare OLD NEW``) pairs two
caches' runs by seed: what a change to the agents moved, per scene and metric.

``--quick`` runs 2 seeds per scene (4 hiding places) and no real runs, into
``runs/evidence-quick/``: a smoke test of the whole pipeline, not the evidence.
"""
