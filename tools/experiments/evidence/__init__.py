"""The evidence: the phase's claims measured, ``python -m tools.experiments.evidence [--quick]``.

Runs the experiments of docs/evidence.md in lockstep (parallel on the cores)
and, for the agreement between the modes, as real processes; measures every
run with ``tools.replay`` (and the cameras' footprints from the truth); writes
``docs/evidence.md``, ``docs/evidence.json`` and the figures under
``docs/evidence/``. Every lockstep run is deterministic: the command named in
each row reproduces its numbers bit for bit. Numbers are reported as measured,
misses included; nothing here is tuned to pass.

1. Fusion improves accuracy: fusion "none" (no sharing) against "ci".
2. CI is consistent (NEES inside its 95 % bounds), naive fusion is overconfident.
3. Stigmergy and coverage: a target hidden at the start; sharing against not.
4. Graceful degradation: error against inbound loss; re-convergence after a partition.
5. A Byzantine peer, with and without reputation.
6. The seed's own figures on its own setup.
7. Lockstep against real processes on the default scenario.

The package: :mod:`.plan` says which runs (jobs) there are, :mod:`.jobs` runs
and measures them, :mod:`.stats`, :mod:`.figures` and :mod:`.report` are the
tables' statistics, the plots and the markdown; each experiment is a module
(:mod:`.fusion`, :mod:`.consistency`, :mod:`.coverage`, :mod:`.degradation`,
:mod:`.byzantine`, :mod:`.seed`, :mod:`.modes`) with ``section(results)``,
registered in :data:`.main.EXPERIMENTS`.

``--quick`` runs fewer seeds, shorter runs and one short real run (a smoke test
of the whole pipeline in a couple of minutes; its numbers are not the evidence)
and writes to ``runs/evidence-quick/`` unless ``--out`` says otherwise.
"""
