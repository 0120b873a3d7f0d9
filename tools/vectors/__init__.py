"""What holds the C firmware core to the Python model: the golden vectors' generators (they
write ``protocol/vectors/``, MZ01.md, SWARM.md) and the differential fuzzer.

``python -m tools.vectors.mz01 [--check]`` and ``python -m tools.vectors.swarm
[--check]``; the tests check that the committed files are what they write.
``python -m tools.vectors.difffuzz`` (``make -C firmware fuzz``) runs random step
sequences through both implementations.
"""
