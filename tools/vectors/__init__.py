"""The golden vectors' generators: they write ``protocol/vectors/`` (MZ01.md, SWARM.md).

``python -m tools.vectors.mz01 [--check]`` and ``python -m tools.vectors.swarm
[--check]``; the tests check that the committed files are what they write.
"""
