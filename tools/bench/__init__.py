"""The benchmark suites of ``stigmesh bench``: each a module with ``run(quick) -> list[dict]``.

Every case is measured against a floor from the same run (shared machines are
noisy); :mod:`tools.commands.bench` names the suites and prints what they measured.
"""
