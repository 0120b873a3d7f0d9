"""Golden vectors for the swarm format: ``python -m tools.vectors.swarm [--check]``.

Writes ``protocol/vectors/swarm_vectors.json`` from hand-built messages (fixed key,
fixed contents): valid datagrams with their decoded content, and invalid datagrams
with the reason a decoder must give. Every invalid datagram except the size and MAC
cases carries a valid MAC, so the check it targets is really reached.
"""

from __future__ import annotations

import argparse
import json
import math
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from protocol.swarm.cells import Cells
from protocol.swarm.chunking import patch_messages, snapshot_messages
from protocol.swarm.codec import encode, pack, seal, to_wire
from protocol.swarm.errors import RejectReason
from protocol.swarm.jsonform import message_to_json
from protocol.swarm.limits import ClaimLimits
from protocol.swarm.messages import (
    DEFAULT_DATAGRAM_LIMIT,
    MAC_LEN,
    PROTOCOL_VERSION,
    Body,
    Bye,
    Heartbeat,
    Look,
    LookRecord,
    Message,
    Mode,
    Patch,
    Ping,
    Pong,
    Track,
    swarm_id_from_name,
)

VECTORS_PATH = Path(__file__).resolve().parents[2] / "protocol" / "vectors" / "swarm_vectors.json"
KEY = bytes.fromhex("5354494701" + "00" * 11 + "0123456789abcdeffedcba9876543210")
OTHER_KEY = bytes(32)
SWARM_NAME = "stigmesh-golden"
SWARM_ID = swarm_id_from_name(SWARM_NAME)
SENDER = "walnut"
EPOCH = 0x5EED1234
T0 = 1000.25  # the sender's monotonic clock at the first vector


def _msg(seq: int, body: Body, t_sent: float = T0, sender: str = SENDER) -> Message:
    return Message(SWARM_ID, sender, EPOCH, seq, t_sent, body)


def _cells_bin(ix: list[int], iy: list[int], mu: list[int], var: list[int]) -> bytes:
    """A cell bin from raw 16-bit words (mu and var as float16 bit patterns)."""
    n = len(ix)
    return struct.pack(f">{n}h{n}h{n}H{n}H", *ix, *iy, *mu, *var)


def _heartbeat() -> Heartbeat:
    return Heartbeat(
        x=1.25, y=-0.5, heading=0.75, cov=(0.01, 0.001, 0.0, 0.02, 0.0, 0.005),
        mode=Mode.SEARCH, origin_ix=-20, origin_iy=-32,
        counters=(("patches_sent", 12), ("rx_rejected", 3)),
    )


def _small_cells() -> Cells:
    return Cells.from_arrays([10, 11, -3, 300], [5, 5, -7, -300],
                             [0.5, 0.25, 0.0, 0.9990234375], [0.125, 1.0, 4.0, 0.0009765625])


def _window_cells(ox: int, oy: int, w: int, h: int) -> Cells:
    jj, ii = np.mgrid[0:h, 0:w]
    k = np.arange(w * h)
    return Cells.from_arrays(
        (ii.ravel() + ox), (jj.ravel() + oy), (k % 17) / 16.0, 0.0625 + (k % 5) / 8.0
    )


def _look() -> Look:
    """Three looks a quarter of a second apart, 3 m range, 62 degrees (1082 mrad)."""
    return Look(
        first_seq=41, t_ref=T0 - 0.25, range_cm=300, fov_mrad=1082,
        looks=(LookRecord(500, 150, 340, 16384), LookRecord(250, 162, 355, 12288),
               LookRecord(0, 175, 371, -32768)),
    )


def valid_messages() -> list[tuple[str, str, Message]]:
    """(name, note, message) for every valid vector."""
    full = patch_messages(
        _window_cells(-40, 12, 20, 10), cell_size_mm=100, t_ref=T0 + 2.0, swarm_id=SWARM_ID,
        sender=SENDER, epoch=EPOCH, first_seq=70000, t_sent=T0 + 2.125,
    )[0]
    snap = snapshot_messages(
        _window_cells(-6, -6, 12, 12), snapshot_id=7, origin_ix=-6, origin_iy=-6, width=12,
        height=12, cell_size_mm=100, t_ref=T0 + 3.0, swarm_id=SWARM_ID, sender=SENDER,
        epoch=EPOCH, first_seq=20, t_sent=T0 + 3.0625,
    )
    track = Track(
        mean=(2.5, -1.0, 0.125, 0.0),
        cov=(0.04, 0.001, 0.0, 0.0, 0.05, 0.0, 0.0, 0.25, 0.0, 0.25),
        t_ref=T0 + 0.5, updates=42,
    )
    return [
        ("heartbeat", "pose, covariance, SEARCH mode, window origin, two counters",
         _msg(1, _heartbeat())),
        ("patch_small", "four cells", _msg(2, Patch(100, T0 - 0.125, _small_cells()))),
        ("patch_full", "a full 1200-byte PATCH: 142 cells from sender 'walnut'", full),
        ("track", "track state with covariance", _msg(3, track, T0 + 0.5)),
        ("ping", "clock probe; t1 is t_sent", _msg(4, Ping(0xC0FFEE), T0 + 0.75)),
        ("pong", "answer to a ping", _msg(5, Pong(77, 512.5, 1000.875, 1000.876953125),
                                          T0 + 0.626953125)),
        ("snapshot_chunk0", "a 12x12 window in two chunks: first", snap[0]),
        ("snapshot_chunk1", "a 12x12 window in two chunks: second", snap[1]),
        ("bye", "clean shutdown with a reason", _msg(6, Bye("shutdown"), T0 + 9.0)),
        ("bye_empty", "clean shutdown without a reason", _msg(7, Bye(), T0 + 9.5)),
        ("look", "three looks: x, y in cm, heading in pi/32768 rad (16384 is +pi/2, "
         "-32768 is -pi), ages in ms before t_ref", _msg(9, _look())),
        ("look_max", "64 looks, the most one LOOK holds, the last numbered 2^32 - 1",
         _msg(10, Look(2**32 - 64, T0, 65535, 6283,
                       tuple(LookRecord(65535 - k, -32768 + k, 32767 - k, k) for k in range(64))))),
        ("track_negative_zero_variance",
         "-0.0 on a covariance diagonal is 0: valid on the wire (a receiver's limits refuse it)",
         _msg(8, Track((1.0, 1.0, 0.0, 0.0), (-0.0, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.1, 0.0,
                                                0.1), T0, 3), T0 + 0.25)),
    ]


def _signed(wire: Any, key: bytes = KEY) -> bytes:
    return seal(pack(wire), key)


def _mutated(message: Message, change: Callable[[list[Any]], None]) -> bytes:
    wire = to_wire(message)
    change(wire)
    return _signed(wire)


def _set(path: tuple[int, ...], value: Any) -> Callable[[list[Any]], None]:
    def change(wire: list[Any]) -> None:
        target = wire
        for i in path[:-1]:
            target = target[i]
        target[path[-1]] = value
    return change


def invalid_datagrams() -> list[tuple[str, str, bytes, RejectReason, list[bytes]]]:
    """(name, note, datagram, reason, datagrams to feed first) for every invalid vector."""
    hb = _msg(1, _heartbeat())
    hb_bytes = encode(hb, KEY)
    hb_payload = pack(to_wire(hb))
    patch = _msg(2, Patch(100, T0 - 0.125, _small_cells()))
    track = _msg(3, Track((0.0, 0.0, 0.0, 0.0), (1.0,) * 10, T0, 1))
    pong = _msg(5, Pong(1, 10.0, 20.0, 20.5))
    snap = snapshot_messages(
        _window_cells(0, 0, 3, 2), snapshot_id=1, origin_ix=0, origin_iy=0, width=3, height=2,
        cell_size_mm=100, t_ref=T0, swarm_id=SWARM_ID, sender=SENDER, epoch=EPOCH,
        first_seq=9, t_sent=T0,
    )[0]
    big = Message(SWARM_ID, SENDER, EPOCH, 70000, T0, Patch(100, T0, _window_cells(0, 0, 13, 11)))
    mac_flipped = bytearray(hb_bytes)
    mac_flipped[-1] ^= 0x01
    payload_flipped = bytearray(hb_bytes)
    payload_flipped[3] ^= 0x10
    dup_map = pack(to_wire(_msg(1, Heartbeat(
        0.0, 0.0, 0.0, (0.0,) * 6, Mode.IDLE, 0, 0, (("a", 1), ("b", 2))))))
    assert dup_map.count(b"\xa1b\x02") == 1
    bad_utf8 = hb_payload.replace(b"\xa6walnut", b"\xa6wal\xff\xfet")
    f16_nan, f16_one, f16_zero = 0x7E00, 0x3C00, 0x0000
    look = _msg(9, _look())
    replayed = encode(_msg(100, Ping(1)), KEY)
    in_window_old = encode(_msg(37, Ping(1)), KEY)
    return [
        ("too_short_empty", "no bytes at all", b"", RejectReason.TOO_SHORT, []),
        ("too_short_mac_only", "16 bytes: a MAC and nothing to authenticate",
         hb_bytes[-MAC_LEN:], RejectReason.TOO_SHORT, []),
        ("too_long", "a validly signed PATCH of 143 cells: 1208 bytes > 1200",
         encode(big, KEY, limit=65000), RejectReason.TOO_LONG, []),
        ("bad_mac_flipped_tag", "the heartbeat vector with the last MAC bit flipped",
         bytes(mac_flipped), RejectReason.BAD_MAC, []),
        ("bad_mac_flipped_payload", "the heartbeat vector with one payload bit flipped",
         bytes(payload_flipped), RejectReason.BAD_MAC, []),
        ("bad_mac_other_key", "the heartbeat signed with another key",
         seal(hb_payload, OTHER_KEY), RejectReason.BAD_MAC, []),
        ("malformed_truncated", "the heartbeat's msgpack minus its last byte, re-signed",
         seal(hb_payload[:-1], KEY), RejectReason.MALFORMED, []),
        ("malformed_reserved_byte", "0xc1 (never used in msgpack), signed",
         seal(b"\xc1", KEY), RejectReason.MALFORMED, []),
        ("malformed_ext_type", "an ext type (fixext 1) as the PING id",
         _ext_in_ping(), RejectReason.MALFORMED, []),
        ("malformed_int_map_key", "an int key in the counters map",
         _mutated(hb, _set((7, 7), {1: 5})), RejectReason.MALFORMED, []),
        ("malformed_duplicate_map_key", "counters {a: 1, a: 2}",
         seal(dup_map.replace(b"\xa1b\x02", b"\xa1a\x02"), KEY), RejectReason.MALFORMED, []),
        ("malformed_bad_utf8", "the sender string is not UTF-8",
         seal(bad_utf8, KEY), RejectReason.MALFORMED, []),
        ("malformed_array_too_long", "a TRACK covariance of 11 floats (limit 10 per array)",
         _mutated(track, _set((7, 1), [1.0] * 11)), RejectReason.MALFORMED, []),
        ("malformed_str_too_long", "a BYE reason of 65 bytes (limit 64 per string)",
         _mutated(_msg(6, Bye()), _set((7, 0), "x" * 65)), RejectReason.MALFORMED, []),
        ("trailing_bytes", "the heartbeat's msgpack followed by nil, re-signed",
         seal(hb_payload + b"\xc0", KEY), RejectReason.TRAILING_BYTES, []),
        ("bad_version", "protocol version 2",
         _mutated(hb, _set((0,), 2)), RejectReason.BAD_VERSION, []),
        ("bad_version_type", "protocol version as a string",
         _mutated(hb, _set((0,), "1")), RejectReason.BAD_VERSION, []),
        ("bad_shape_envelope_map", "the envelope is a map",
         _signed({"version": PROTOCOL_VERSION}), RejectReason.BAD_SHAPE, []),
        ("bad_shape_envelope_short", "an envelope of 7 elements (no body)",
         _signed(to_wire(hb)[:7]), RejectReason.BAD_SHAPE, []),
        ("unknown_kind", "kind 99", _mutated(hb, _set((1,), 99)), RejectReason.UNKNOWN_KIND, []),
        ("bad_type_kind", "kind as a float", _mutated(hb, _set((1,), 1.0)), RejectReason.BAD_TYPE,
         []),
        ("bad_type_sender_bin", "the sender id as bin, not str",
         _mutated(hb, _set((3,), b"walnut")), RejectReason.BAD_TYPE, []),
        ("bad_type_t_sent_int", "t_sent as an int",
         _mutated(hb, _set((6,), 1000)), RejectReason.BAD_TYPE, []),
        ("bad_type_seq_float", "seq as a float",
         _mutated(hb, _set((5,), 1.0)), RejectReason.BAD_TYPE, []),
        ("bad_type_seq_bool", "seq as true", _mutated(hb, _set((5,), True)),
         RejectReason.BAD_TYPE, []),
        ("bad_type_counter_value", "a counter value as a float",
         _mutated(hb, _set((7, 7), {"rx": 1.5})), RejectReason.BAD_TYPE, []),
        ("bad_shape_body_arity", "a HEARTBEAT body of 7 elements",
         _mutated(hb, lambda w: w[7].pop()), RejectReason.BAD_SHAPE, []),
        ("bad_shape_cov_length", "a HEARTBEAT covariance of 5 floats",
         _mutated(hb, _set((7, 3), [1.0] * 5)), RejectReason.BAD_SHAPE, []),
        ("bad_shape_cell_bin", "a PATCH cell bin of 7 bytes",
         _mutated(patch, _set((7, 2), b"\x00" * 7)), RejectReason.BAD_SHAPE, []),
        ("not_finite_t_sent", "t_sent is NaN",
         _mutated(hb, _set((6,), math.nan)), RejectReason.NOT_FINITE, []),
        ("not_finite_track_cov", "a TRACK covariance entry is +inf",
         _mutated(track, _set((7, 1, 0), math.inf)), RejectReason.NOT_FINITE, []),
        ("not_finite_cell_mu", "a cell's mu is float16 NaN",
         _mutated(patch, _set((7, 2), _cells_bin([1], [1], [f16_nan], [f16_one]))),
         RejectReason.NOT_FINITE, []),
        ("out_of_range_seq", "seq = 2^32",
         _mutated(hb, _set((5,), 2**32)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_sender_long", "a 33-byte sender id",
         _mutated(hb, _set((3,), "w" * 33)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_sender_empty", "an empty sender id",
         _mutated(hb, _set((3,), "")), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_heading", "heading 4.0 rad",
         _mutated(hb, _set((7, 2), 4.0)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_mode", "mode 9", _mutated(hb, _set((7, 4), 9)),
         RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_origin", "window origin ix 40000 (outside int16)",
         _mutated(hb, _set((7, 5), 40000)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_counter_negative", "a counter of -1",
         _mutated(hb, _set((7, 7), {"rx": -1})), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_cell_size", "cell size 0 mm",
         _mutated(patch, _set((7, 0), 0)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_var_zero", "a cell with var 0",
         _mutated(patch, _set((7, 2), _cells_bin([1], [1], [f16_one], [f16_zero]))),
         RejectReason.OUT_OF_RANGE, []),
        ("inconsistent_t_ref", "a PATCH whose t_ref is after its t_sent",
         _mutated(patch, _set((7, 1), T0 + 1.0)), RejectReason.INCONSISTENT, []),
        ("inconsistent_pong_times", "a PONG with t3 before t2",
         _mutated(pong, _set((7, 3), 19.5)), RejectReason.INCONSISTENT, []),
        ("inconsistent_duplicate_cell", "a PATCH holding cell (1, 1) twice",
         _mutated(patch, _set((7, 2), _cells_bin([1, 1], [1, 1], [0, 0], [f16_one] * 2))),
         RejectReason.INCONSISTENT, []),
        ("inconsistent_chunk_index", "SNAPSHOT chunk index 1 of 1",
         _mutated(snap, _set((7, 1), 1)), RejectReason.INCONSISTENT, []),
        ("inconsistent_snapshot_cell", "a SNAPSHOT cell outside its 3x2 window",
         _mutated(snap, _set((7, 9), _cells_bin([3], [0], [0], [f16_one]))),
         RejectReason.INCONSISTENT, []),
        ("bad_shape_look_bin", "a LOOK bin of 12 bytes",
         _mutated(look, _set((7, 4), b"\x00" * 12)), RejectReason.BAD_SHAPE, []),
        ("bad_type_look_range_float", "a LOOK range of 3.0 (must be an int of cm)",
         _mutated(look, _set((7, 2), 3.0)), RejectReason.BAD_TYPE, []),
        ("out_of_range_look_empty", "a LOOK with no looks",
         _mutated(look, _set((7, 4), b"")), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_look_too_many", "a LOOK of 65 looks",
         _mutated(look, _set((7, 4), b"\x00" * 8 * 65)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_look_fov", "a field of view of 6284 mrad (over 2 pi)",
         _mutated(look, _set((7, 3), 6284)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_look_range_zero", "a range of 0 cm",
         _mutated(look, _set((7, 2), 0)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_look_seq", "three looks from first_seq 2^32 - 2: the last beyond u32",
         _mutated(look, _set((7, 0), 2**32 - 2)), RejectReason.OUT_OF_RANGE, []),
        ("inconsistent_look_t_ref", "a LOOK whose t_ref is after its t_sent",
         _mutated(look, _set((7, 1), T0 + 1.0)), RejectReason.INCONSISTENT, []),
        ("malformed_too_deep", "a PING id nested in two more arrays (depth 4 > 3)",
         _mutated(_msg(4, Ping(1)), _set((7, 0), [[1]])), RejectReason.MALFORMED, []),
        ("malformed_very_deep", "1000 nested arrays (Python's recursion limit is near)",
         seal(b"\x91" * 1000 + b"\x01", KEY), RejectReason.MALFORMED, []),
        ("out_of_range_sender_bidi", "a sender holding U+202E (right-to-left override)",
         _mutated(hb, _set((3,), "wal\u202enut")), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_sender_space", "a sender holding a space",
         _mutated(hb, _set((3,), "wal nut")), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_counter_name", "a counter name holding a slash",
         _mutated(hb, _set((7, 7), {"rx/bad": 1})), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_bye_reason", "a BYE reason holding a non-ASCII character",
         _mutated(_msg(6, Bye()), _set((7, 0), "caf\u00e9")), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_t_sent_negative", "t_sent -1.0 (monotonic times are >= 0)",
         _mutated(hb, _set((6,), -1.0)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_t_sent_huge", "t_sent 2^32 s",
         _mutated(hb, _set((6,), 2.0**32)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_t_ref_far_past", "a TRACK t_ref of -1e300",
         _mutated(track, _set((7, 2), -1e300)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_pong_t2", "a PONG t2 of -5.0",
         _mutated(pong, _set((7, 2), -5.0)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_chunk_index_negative", "SNAPSHOT chunk index -1",
         _mutated(snap, _set((7, 1), -1)), RejectReason.OUT_OF_RANGE, []),
        ("out_of_range_chunk_index_u16", "SNAPSHOT chunk index 65536",
         _mutated(snap, _set((7, 1), 65536)), RejectReason.OUT_OF_RANGE, []),
        ("wrong_swarm", "a valid heartbeat of swarm id 1, signed with the same key",
         _mutated(hb, _set((2,), 1)), RejectReason.WRONG_SWARM, []),
        ("duplicate", "the same PING (seq 100) twice",
         replayed, RejectReason.DUPLICATE, [replayed]),
        ("too_old", "seq 36 after seq 100: 64 behind the newest",
         encode(_msg(36, Ping(1)), KEY), RejectReason.TOO_OLD, [replayed]),
        ("duplicate_in_window", "seq 37 twice after seq 100 (63 behind: inside the window)",
         in_window_old, RejectReason.DUPLICATE, [replayed, in_window_old]),
    ]


RECEIVER_NOW = 400.0  # the receiver's clock when it judges the datagrams below
OFFSET = T0 - RECEIVER_NOW  # the sender's clock minus the receiver's
ROOM = (5.0, 5.0)


def claim_limits() -> ClaimLimits:
    """The limits of the plausibility vectors: a 5 m x 5 m room, the defaults otherwise."""
    return ClaimLimits.for_room(*ROOM, margin=1.0)


def implausible_datagrams() -> list[tuple[str, str, bytes, float | None, str | None]]:
    """(name, note, datagram, offset or None for an unmapped clock, reason or None)."""
    cov = (0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.1, 0.0, 0.1)

    def track(mean: tuple[float, ...], c: tuple[float, ...] = cov, t_ref: float = T0,
              t_sent: float = T0) -> bytes:
        return encode(_msg(3, Track(mean, c, t_ref, 9), t_sent), KEY)

    def cells(mu: float, var: float) -> bytes:
        return encode(_msg(2, Patch(100, T0, Cells.from_arrays([3], [4], [mu], [var]))), KEY)

    def heartbeat(x: float, mode: Mode = Mode.SEARCH, t_sent: float = T0) -> bytes:
        body = Heartbeat(x, 2.0, 0.0, (0.01, 0.0, 0.0, 0.01, 0.0, 0.01), mode, 0, 0, ())
        return encode(_msg(1, body, t_sent), KEY)

    def looks(x_cm: int, range_cm: int = 300, age_ms: int = 0, t_ref: float = T0) -> bytes:
        body = Look(5, t_ref, range_cm, 1082, (LookRecord(age_ms, 150, 200, 0),
                                               LookRecord(0, x_cm, 200, 0)))
        return encode(_msg(9, body), KEY)

    rank_one = (0.1,) * 10
    return [
        ("track_ok", "a track in the room, now", track((2.0, 2.0, 0.5, 0.0)), OFFSET, None),
        ("track_margin", "at the room's corner minus the 1 m margin",
         track((-1.0, 6.0, 0.0, 0.0)), OFFSET, None),
        ("track_outside", "1.01 m beyond the east wall", track((6.01, 2.0, 0.0, 0.0)), OFFSET,
         "implausible_position"),
        ("track_huge", "a mean of 3e38 m", track((3e38, 3e38, 0.0, 0.0)), OFFSET,
         "implausible_position"),
        ("track_fast", "8 m/s along x and y: 11.3 m/s > 10", track((2.0, 2.0, 8.0, 8.0)), OFFSET,
         "implausible_velocity"),
        ("track_overconfident", "variances of 1e-30",
         track((2.0, 2.0, 0.0, 0.0), (1e-30, 0.0, 0.0, 0.0, 1e-30, 0.0, 0.0, 1e-30, 0.0, 1e-30)),
         OFFSET, "implausible_covariance"),
        ("track_not_positive_definite", "every entry 0.1: rank one",
         track((2.0, 2.0, 0.0, 0.0), rank_one), OFFSET, "implausible_covariance"),
        ("track_zero_variance", "-0.0 on the diagonal: below the 1e-6 floor",
         track((2.0, 2.0, 0.0, 0.0), (-0.0, *cov[1:])), OFFSET, "implausible_covariance"),
        ("track_old", "t_ref 5.5 s before the receiver's now",
         track((2.0, 2.0, 0.0, 0.0), t_ref=T0 - 5.5), OFFSET, "implausible_time"),
        ("track_from_the_future", "sent 1.5 s ahead of the receiver's now",
         track((2.0, 2.0, 0.0, 0.0), t_sent=T0 + 1.5), OFFSET, "implausible_time"),
        ("track_old_unmapped", "5.5 s old, but the sender's clock is not mapped yet: no time "
         "rule runs (the receiver holds or refuses it for that reason, not this one)",
         track((2.0, 2.0, 0.0, 0.0), t_ref=T0 - 5.5), None, None),
        ("patch_ok", "mu 1.0, var 1e-3", cells(1.0, 1e-3), OFFSET, None),
        ("patch_mu_huge", "mu 65504 (float16's largest)", cells(65504.0, 0.5), OFFSET,
         "implausible_cells"),
        ("patch_var_tiny", "var 2^-24 (float16's smallest)", cells(0.5, 2.0**-24), OFFSET,
         "implausible_cells"),
        ("patch_mu_negative", "mu -0.5", cells(-0.5, 0.5), OFFSET, "implausible_cells"),
        ("heartbeat_outside", "a pose at x = 7 m", heartbeat(7.0), OFFSET,
         "implausible_position"),
        ("heartbeat_lost_pose", "LOST_POSE: its position means nothing and is not judged",
         heartbeat(70.0, Mode.LOST_POSE), OFFSET, None),
        ("heartbeat_stale", "sent 6 s ago", heartbeat(2.0, t_sent=T0 - 6.0), OFFSET,
         "implausible_time"),
        ("look_ok", "two looks from inside the room, 3 m range", looks(250), OFFSET, None),
        ("look_outside", "the second look's camera 1.5 m beyond the east wall", looks(650),
         OFFSET, "implausible_position"),
        ("look_range", "a camera reaching 10.01 m", looks(250, range_cm=1001), OFFSET,
         "implausible_look"),
        ("look_oldest_stale", "t_ref now, but its first look 5.5 s old", looks(250, age_ms=5500),
         OFFSET, "implausible_time"),
        ("look_oldest_stale_unmapped", "the same, before the sender's clock is mapped",
         looks(250, age_ms=5500), None, None),
    ]


def _ext_in_ping() -> bytes:
    payload = pack(to_wire(_msg(4, Ping(1))))
    assert payload.endswith(b"\x91\x01")  # body [1]
    return seal(payload[:-1] + b"\xd4\x01\x00", KEY)


def build_vectors() -> dict[str, Any]:
    common = {"key_hex": KEY.hex(), "swarm_id": SWARM_ID, "limit": DEFAULT_DATAGRAM_LIMIT}
    valid = []
    for name, note, message in valid_messages():
        data = encode(message, KEY)
        valid.append({
            "name": name, "note": note, "kind": message.kind.name, **common,
            "length": len(data), "datagram_hex": data.hex(),
            "message": message_to_json(message),
        })
    invalid = []
    for name, note, data, reason, before in invalid_datagrams():
        invalid.append({
            "name": name, "note": note, **common, "preceded_by_hex": [b.hex() for b in before],
            "datagram_hex": data.hex(), "reason": str(reason),
        })
    lim = claim_limits()
    implausible = {
        "note": "valid datagrams a receiver refuses by its limits (SWARM.md §10.5); judge each "
                "at receiver time `now` with t_local = t_remote - offset",
        "now": RECEIVER_NOW,
        "limits": {f: getattr(lim, f) for f in lim.__dataclass_fields__},
        "cases": [
            {"name": name, "note": note, "datagram_hex": data.hex(), "offset": offset,
             "reason": reason}
            for name, note, data, offset, reason in implausible_datagrams()
        ],
    }
    return {
        "format": "stigmesh swarm golden vectors; see protocol/SWARM.md",
        "protocol_version": PROTOCOL_VERSION,
        "swarm_name": SWARM_NAME,
        **common,
        "valid": valid,
        "invalid": invalid,
        "implausible": implausible,
    }


def render(vectors: dict[str, Any]) -> str:
    return json.dumps(vectors, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed file instead of writing it")
    parser.add_argument("--out", type=Path, default=VECTORS_PATH)
    args = parser.parse_args(argv)
    text = render(build_vectors())
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'OUT OF DATE'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
