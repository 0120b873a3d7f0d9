"""Fault vocabulary: network faults on a link and Byzantine behaviours of an agent.

## Faults, for users

One vocabulary everywhere: the ``stigmesh faults`` command, scenario files, the
agent's transport and the lockstep network. A spec is a list of ``key=value``
tokens separated by spaces; ``clear`` alone means no fault. In a scenario file the
same keys form a TOML table, where a bare number for a duration means seconds.

**Network faults** (:class:`LinkFaults`, one direction of one agent's transport):

- ``drop=0.3`` (or ``30%``): each datagram is lost with this probability.
- ``burst=ENTER,LEAVE[,LOSS_BAD[,LOSS_GOOD]]``: Gilbert–Elliott burst loss. Per
  datagram the link goes good→bad with probability ENTER and bad→good with LEAVE;
  the datagram is then lost with LOSS_BAD (default 1) in the bad state, LOSS_GOOD
  (default 0) in the good one. Mean burst 1/LEAVE datagrams; stationary loss
  (ENTER·LOSS_BAD + LEAVE·LOSS_GOOD) / (ENTER + LEAVE). State is kept per link.
- ``delay=50ms``: every delivered copy waits this long. Durations need a unit:
  ``us``, ``ms`` or ``s``.
- ``jitter=10ms[,uniform|normal]``: added to the delay, uniform on ±10 ms (the
  default) or normal with σ = 10 ms; the total never goes below 0.
- ``dup=0.01``: a second copy is delivered, with its own delay.
- ``reorder=0.05[,HOLD]``: a copy is held back HOLD longer (default 250 ms), so
  datagrams sent after it overtake it.
- ``corrupt=0.001[,K]``: a copy gets one bit flipped in each of K (default 1)
  distinct random bytes.
- ``partition=walnut,hazel|oak``: groups separated by ``|``; datagrams between
  agents of different groups are lost. Agents in no group, and broadcast
  addresses, are not affected (partition an agent's inbound side, or the network).

Example: ``drop=0.3 burst=0.05,0.5,1.0 delay=50ms jitter=10ms dup=0.01 reorder=0.05``.
Faults apply in this order: partition, burst, drop, duplicate; then for each copy
delay and jitter, reorder, corrupt. Each fault kind has its own seeded random
stream, so two runs with one seed and different drop rates lose nested sets of
datagrams. Every applied fault is counted and logged (kind, time, size).

**Byzantine behaviours** (:class:`ByzantineSpec`, one lying agent):

- ``bias=2,0``: (dx, dy) metres added to positions; grid cells move by whole cells.
- ``noise=0.3``: Gaussian noise, σ in metres, added to positions, fresh each time.
- ``replay=5s``: broadcast the TRACK and PATCH beliefs of 5 s ago, restamped as
  current (until 5 s have passed, the oldest it has).
- ``overconfident=10``: covariances and cell variances divided by 10 (claims a
  confidence it does not have).
- ``at=send`` (default) or ``at=sense``: where bias, noise and overconfidence act.
  ``send``: on what it broadcasts, its private belief staying honest (a liar).
  ``sense``: on its detections, which its honest filters then spread (a broken
  sensor). Replay always acts on what is sent.

Example: ``bias=2,0 noise=0.3 replay=5s overconfident=10``.

## API

- :class:`LinkFaults`, :func:`parse_faults`, :func:`format_faults`,
  ``LinkFaults.from_mapping`` / ``to_mapping``;
  :class:`LinkModel` ``(spec, seed, resolve=...)`` with
  ``route(data, src, dst, now) -> [(delay, bytes)]``, ``hook(clock)`` for
  ``tests/support/network.FakeNetwork``, ``counters`` and ``take_events()``.
- :class:`ByzantineSpec`, :func:`parse_byzantine`, :func:`format_byzantine`,
  ``ByzantineSpec.from_mapping`` / ``to_mapping``; :class:`Byzantine` ``(spec, seed)``
  with ``transform_detection``, ``transform_track``, ``transform_patch``,
  ``transform_cells``.
- :class:`FaultSpecError` (a ``ValueError``) names the bad token.
"""

from agents.faults.byzantine import Byzantine, CellArrays
from agents.faults.byzantine_spec import ByzantineSpec, Stage, format_byzantine, parse_byzantine
from agents.faults.link_model import FaultEvent, FaultKind, LinkModel, names_resolver
from agents.faults.link_spec import (
    DEFAULT_REORDER_HOLD,
    BurstLoss,
    JitterShape,
    LinkFaults,
    format_faults,
    parse_faults,
)
from agents.faults.tokens import FaultSpecError

__all__ = [
    "DEFAULT_REORDER_HOLD",
    "BurstLoss",
    "Byzantine",
    "ByzantineSpec",
    "CellArrays",
    "FaultEvent",
    "FaultKind",
    "FaultSpecError",
    "JitterShape",
    "LinkFaults",
    "LinkModel",
    "Stage",
    "format_byzantine",
    "format_faults",
    "names_resolver",
    "parse_byzantine",
    "parse_faults",
]
