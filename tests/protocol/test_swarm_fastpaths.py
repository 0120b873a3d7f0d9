"""The codec's fast paths give exactly what its general paths (and SWARM.md) give.

Cells are checked on bit patterns instead of float16 arithmetic, plain sender arrays
are converted in one go, a well-typed envelope skips the general structure checks,
and msgpack writes bodies without float-32 arrays in one call. Each is compared here
with the general path, or with the float16 reference it replaced, on valid and
invalid inputs.
"""

from __future__ import annotations

import hmac
import math
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.swarm import Cells, Message, Patch, RejectReason, SwarmDecodeError, Track, codec
from protocol.swarm.cells import _convert, _convert_plain, _plain, split_cells
from protocol.swarm.chunking import patch_capacity, patch_messages
from protocol.swarm.codec import decode_payload, pack, payload_of, seal, to_wire
from protocol.swarm.errors import FieldError
from protocol.swarm.fields import int_field, text_field, time_field
from protocol.swarm.messages import U32_MAX, validate_header
from tests.protocol.test_swarm_codec import bodies, name, u32
from tests.protocol.test_swarm_fuzz import mutated_payloads, mutated_wires
from tools.vectors.swarm import KEY, SWARM_ID, valid_messages

# --- cells: bit patterns against float16 arithmetic ------------------------------------------


def reference_reason(words: npt.NDArray[np.uint16]) -> RejectReason | None:
    """SWARM.md §6 in float16 arithmetic and Python sets: the rules, slowly."""
    n = len(words) // 4
    if not n:
        return None
    values = words[2 * n :].view(np.float16)
    if not np.isfinite(values).all():
        return RejectReason.NOT_FINITE
    if not values[n:].min() > 0:
        return RejectReason.OUT_OF_RANGE
    pairs = set(zip(words[:n].tolist(), words[n : 2 * n].tolist(), strict=True))
    return RejectReason.INCONSISTENT if len(pairs) != n else None


def outcome_of_bytes(wire: bytes) -> RejectReason | Cells:
    try:
        return Cells.from_bytes(wire)
    except FieldError as e:
        return e.reason


def test_every_float16_bit_pattern_as_mu_and_as_var() -> None:
    patterns = np.arange(2**16, dtype=np.uint16)
    halves = patterns.view(np.float16)
    finite = np.isfinite(halves)
    with np.errstate(invalid="ignore"):
        positive = finite & (halves > 0)
    one = 0x3C00  # 1.0
    for p in range(2**16):
        as_mu = np.array([0, 0, p, one], ">u2").tobytes()
        as_var = np.array([0, 0, 0, p], ">u2").tobytes()
        mu_expected = None if finite[p] else RejectReason.NOT_FINITE
        var_expected = (
            RejectReason.NOT_FINITE if not finite[p]
            else None if positive[p] else RejectReason.OUT_OF_RANGE
        )
        got_mu, got_var = outcome_of_bytes(as_mu), outcome_of_bytes(as_var)
        assert (None if isinstance(got_mu, Cells) else got_mu) == mu_expected, hex(p)
        assert (None if isinstance(got_var, Cells) else got_var) == var_expected, hex(p)


SPECIAL_WORDS = [
    0x0000, 0x8000, 0x0001, 0x00FF, 0x0100, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0x7C00, 0x7C01,
    0x7E00, 0x7FFF, 0x8001, 0xBC00, 0xFBFF, 0xFC00, 0xFE00, 0xFFFF,
]
words16 = st.sampled_from(SPECIAL_WORDS) | st.integers(0, 2**16 - 1)


@st.composite
def cell_words(draw: st.DrawFn) -> npt.NDArray[np.uint16]:
    """ix | iy | mu | var words of 0..40 cells, repeats likely, odd values common."""
    n = draw(st.integers(0, 40))
    index = st.integers(0, 3) | st.integers(0, 2**16 - 1)  # a narrow range repeats cells
    ixy = draw(st.lists(index, min_size=2 * n, max_size=2 * n))
    good = st.integers(0x0001, 0x7BFF)
    odd = st.one_of(good, good, words16) if draw(st.booleans()) else good  # half all valid
    mu = draw(st.lists(st.one_of(good, words16) | odd, min_size=n, max_size=n))
    var = draw(st.lists(odd, min_size=n, max_size=n))
    return np.array(ixy + mu + var, np.uint16)


@settings(max_examples=600, deadline=None)
@given(words=cell_words())
def test_cells_from_bytes_agree_with_the_float16_reference(words: npt.NDArray[np.uint16]) -> None:
    wire = words.astype(">u2").tobytes()
    got = outcome_of_bytes(wire)
    expected = reference_reason(words)
    if expected is not None:
        assert got == expected
        return
    assert isinstance(got, Cells)
    n = len(words) // 4
    assert got.to_bytes() == wire
    assert np.array_equal(got.ix, words[:n].view(np.int16))
    assert np.array_equal(got.iy, words[n : 2 * n].view(np.int16))
    assert got.mu.tobytes() == words[2 * n : 3 * n].tobytes()
    assert got.var.tobytes() == words[3 * n :].tobytes()
    assert not any(a.flags.writeable for a in (got.ix, got.iy, got.mu, got.var))
    # The general constructor runs the same checks on arrays.
    assert Cells(got.ix, got.iy, got.mu, got.var) == got


@settings(max_examples=300, deadline=None)
@given(words=cell_words())
def test_cells_constructor_agrees_with_the_float16_reference(
    words: npt.NDArray[np.uint16],
) -> None:
    n = len(words) // 4
    ix, iy = words[:n].view(np.int16), words[n : 2 * n].view(np.int16)
    mu, var = words[2 * n : 3 * n].view(np.float16), words[3 * n :].view(np.float16)
    try:
        got: RejectReason | None = None
        cells = Cells(ix, iy, mu, var)
        assert cells.to_bytes() == words.astype(">u2").tobytes()
    except FieldError as e:
        got = e.reason
    assert got == reference_reason(words)


def test_a_repeated_cell_anywhere_is_found() -> None:
    n = 9
    for i in range(n):
        for j in range(i + 1, n):
            ix, iy = np.arange(n), -np.arange(n)
            ix[j], iy[j] = ix[i], iy[i]
            with pytest.raises(ValueError, match="twice"):
                Cells.from_arrays(ix, iy, np.zeros(n), np.ones(n))
            wire = np.concatenate((ix, iy, np.zeros(n), np.ones(n))).astype(">i2").tobytes()
            assert outcome_of_bytes(wire) == RejectReason.INCONSISTENT
    assert len(Cells.from_arrays(np.arange(n), np.zeros(n, int), np.zeros(n), np.ones(n))) == n


# --- cells: the plain sender arrays against the general conversion ---------------------------

floats = st.sampled_from(
    [0.0, -0.0, 1.0, -1.0, 1e-9, -1e-9, 3e-8, 6e-8, 1e-5, 65504.0, 65519.9, 65520.0, 1e6,
     math.nan, math.inf, -math.inf, 5e-7, 0.1]
) | st.floats(-7e4, 7e4) | st.floats(allow_nan=True, allow_infinity=True)


@st.composite
def sender_arrays(draw: st.DrawFn) -> tuple[npt.NDArray[Any], ...]:
    n = draw(st.integers(0, 30))
    index = st.integers(-2, 2) | st.integers(-(2**15), 2**15 - 1)
    ix, iy = (np.array(draw(st.lists(index, min_size=n, max_size=n)), np.int16) for _ in "xy")
    var_values = st.floats(1e-4, 100.0) | floats
    mu = np.array(draw(st.lists(floats, min_size=n, max_size=n)), np.float64)
    var = np.array(draw(st.lists(var_values, min_size=n, max_size=n)), np.float64)
    return ix, iy, mu, var


def outcome_of_arrays(*arrays: Any) -> tuple[str, str] | bytes:
    try:
        return Cells.from_arrays(*arrays).to_bytes()
    except FieldError as e:
        return str(e.reason), e.detail


@settings(max_examples=400, deadline=None)
@given(arrays=sender_arrays())
def test_plain_sender_arrays_convert_like_any_arrays(arrays: tuple[npt.NDArray[Any], ...]) -> None:
    ix, iy, mu, var = arrays
    assert _plain(ix, iy, mu, var) is not None  # the fast conversion is the one taken
    general = (ix.astype(np.int64), iy.tolist(), mu.tolist(), var.tolist())
    assert _plain(*general) is None
    fast, slow = _convert_plain(ix, iy, mu, var)[0], _convert(ix, iy, mu, var)[0]
    assert fast.tobytes() == slow.tobytes()
    assert outcome_of_arrays(ix, iy, mu, var) == outcome_of_arrays(*general)
    # ... and as SWARM.md §6 writes them: each array big-endian, mu and var rounded.
    with np.errstate(over="ignore", invalid="ignore"):
        reference = b"".join(
            a.astype(dt).tobytes() for a, dt in zip(arrays, (">i2", ">i2", ">f2", ">f2"),
                                                      strict=True)
        )
    got = outcome_of_arrays(ix, iy, mu, var)
    assert isinstance(got, tuple) or got == reference


def test_plain_needs_exactly_plain_arrays() -> None:
    ix, mu = np.zeros(3, np.int16), np.ones(3)
    assert _plain(ix, ix, mu, mu) is not None
    assert _plain(ix, ix, mu, mu[:2]) is None  # unequal lengths: the general path says so
    assert _plain(ix.astype(">i2"), ix, mu, mu) is None
    assert _plain(ix, ix, mu.astype(np.float32), mu) is None
    assert _plain(ix.reshape(3, 1), ix.reshape(3, 1), mu.reshape(3, 1), mu.reshape(3, 1)) is None
    assert _plain(list(ix), ix, mu, mu) is None
    with pytest.raises(ValueError, match="equal lengths"):
        Cells.from_arrays(ix, ix, mu, mu[:2])


def test_a_slice_keeps_a_bin_equal_to_its_arrays() -> None:
    n = 50
    cells = Cells.from_arrays(np.arange(n), -np.arange(n), np.linspace(-1, 1, n), np.full(n, 0.5))
    for start, stop in [(0, 10), (10, 50), (49, 50), (3, 3), (20, 10), (40, 60), (0, 49)]:
        part = cells.slice(start, stop)
        rebuilt = Cells(part.ix.copy(), part.iy.copy(), part.mu.copy(), part.var.copy())
        assert part.to_bytes() == rebuilt.to_bytes()
        assert len(part) == len(part.ix) == len(range(n)[start:stop])


# --- decoding: the well-typed shortcut against the full structure checks ---------------------


def general_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_well_typed_kind", lambda env: None)


def decode_outcome(payload: bytes) -> Message | tuple[str, str]:
    try:
        return decode_payload(payload, SWARM_ID)
    except SwarmDecodeError as e:
        return str(e.reject_reason), e.detail


def both_paths(payload: bytes) -> tuple[Message | tuple[str, str], Message | tuple[str, str]]:
    fast = decode_outcome(payload)
    with pytest.MonkeyPatch.context() as mp:
        general_only(mp)
        return fast, decode_outcome(payload)


def test_every_valid_vector_takes_the_shortcut() -> None:
    for _, _, message in valid_messages():
        env = msgpack.unpackb(payload_of(message), object_pairs_hook=codec._map_pairs)
        assert codec._well_typed_kind(env) == message.kind
        fast, general = both_paths(payload_of(message))
        assert fast == general == message


@settings(max_examples=300, deadline=None)
@given(wire=mutated_wires())
def test_structured_mutations_decode_alike_on_both_paths(wire: list[Any]) -> None:
    payload = pack(wire)
    fast, general = both_paths(payload)
    assert fast == general


@settings(max_examples=300, deadline=None)
@given(payload=mutated_payloads())
def test_byte_mutations_decode_alike_on_both_paths(payload: bytes) -> None:
    fast, general = both_paths(payload)
    assert fast == general


@settings(max_examples=200, deadline=None)
@given(body=bodies(), seq=u32, sender=name)
def test_random_messages_take_the_shortcut(body: Any, seq: int, sender: str) -> None:
    message = Message(SWARM_ID, sender, 5, seq, 2e6, body)
    env = msgpack.unpackb(payload_of(message), object_pairs_hook=codec._map_pairs)
    assert codec._well_typed_kind(env) == message.kind
    codec._check_depth(env)
    assert codec._check_types(env) == message.kind
    assert decode_payload(payload_of(message), SWARM_ID) == message


def test_the_shortcut_returns_a_kind_only_where_the_full_checks_do() -> None:
    base = to_wire(valid_messages()[0][2])
    for env in [
        [*base[:7], [*base[7][:3], [0.0] * 5, *base[7][4:]]],  # a 5-element covariance
        [*base[:7], [*base[7][:3], [0.0] * 5 + [1], *base[7][4:]]],
        [*base[:7], [*base[7][:3], [[0.0]] * 6, *base[7][4:]]],  # nested too deep
        [True, *base[1:]],
        [1, 9, *base[2:]],
        [*base[:6], 1, base[7]],  # t_sent an int
    ]:
        payload = msgpack.packb(env)
        parsed = msgpack.unpackb(payload, object_pairs_hook=codec._map_pairs)
        assert codec._well_typed_kind(parsed) is None
        fast, general = both_paths(payload)
        assert fast == general and isinstance(fast, tuple)
    odd_bin = [1, 2, SWARM_ID, "walnut", 1, 1, 1.0, [100, 0.5, b"\x00" * 9]]
    assert decode_outcome(msgpack.packb(odd_bin)) == (RejectReason.BAD_SHAPE, (
        "PATCH body[2]: bin length is not a multiple of 8"
    ))
    odd_looks = [1, 8, SWARM_ID, "walnut", 1, 1, 1.0, [0, 0.5, 300, 1082, b"\x00" * 12]]
    parsed = msgpack.unpackb(msgpack.packb(odd_looks), object_pairs_hook=codec._map_pairs)
    assert codec._well_typed_kind(parsed) is None
    assert decode_outcome(msgpack.packb(odd_looks)) == (RejectReason.BAD_SHAPE, (
        "LOOK body[4]: bin length is not a multiple of 8"
    ))


# --- encoding: one msgpack call against the recursive packer ---------------------------------


@settings(max_examples=200, deadline=None)
@given(body=bodies(), seq=u32, epoch=u32, sender=name)
def test_payload_is_the_recursive_packing(body: Any, seq: int, epoch: int, sender: str) -> None:
    message = Message(SWARM_ID, sender, epoch, seq, 2e6, body)
    assert payload_of(message) == pack(to_wire(message))


def test_valid_vectors_pack_alike_both_ways() -> None:
    for _, _, message in valid_messages():
        assert payload_of(message) == pack(to_wire(message))
        assert codec.encode(message, KEY) == seal(pack(to_wire(message)), KEY)


def test_float32_kinds_still_use_the_recursive_packer() -> None:
    track = Message(SWARM_ID, "w", 1, 1, 2.0, Track((0.1,) * 4, (0.5,) * 10, 1.0, 3))
    assert b"\xca" in payload_of(track)  # float 32 in the mean and covariance
    assert payload_of(track) != msgpack.packb(to_wire(track), use_bin_type=True)


# --- the sender's messages: the header checked once per chunk, as Message() does -------------


@pytest.mark.parametrize(
    "overrides",
    [
        {}, {"sender": "bad name"}, {"sender": ""}, {"epoch": -1}, {"first_seq": 2**32 - 3},
        {"first_seq": 1.0}, {"first_seq": np.int64(5)}, {"t_sent": math.nan},
        {"t_sent": 2.0**32}, {"t_ref": 200.0}, {"t_ref": -1.0}, {"cell_size_mm": 0},
        {"swarm_id": 2**32}, {"t_sent": np.float64(150.0)},
    ],
)
def test_patch_messages_check_like_the_message_constructor(overrides: dict[str, Any]) -> None:
    cells = Cells.from_arrays(np.arange(300), np.zeros(300, int), np.full(300, 0.5),
                              np.full(300, 0.1))
    valid: dict[str, Any] = {"cell_size_mm": 100, "t_ref": 99.0, "swarm_id": SWARM_ID,
                             "sender": "walnut", "epoch": 7, "t_sent": 100.0}
    args = valid | {"first_seq": 10} | overrides
    chunks = split_cells(cells, patch_capacity(**valid))

    def direct() -> list[Message] | tuple[type, str]:
        try:
            got = patch_messages(cells, **args)
        except (ValueError, TypeError) as e:
            return type(e), str(e)
        return got

    def by_constructor() -> list[Message] | tuple[type, str]:
        try:
            return [
                Message(args["swarm_id"], args["sender"], args["epoch"], args["first_seq"] + i,
                        args["t_sent"], Patch(args["cell_size_mm"], args["t_ref"], chunk))
                for i, chunk in enumerate(chunks)
            ]
        except (ValueError, TypeError) as e:
            return type(e), str(e)

    got, expected = direct(), by_constructor()
    assert got == expected
    if isinstance(got, list):
        assert len(got) == len(chunks) > 1
        assert all(type(m.seq) is int and type(m.t_sent) is float for m in got)


# --- the MAC: precomputed key blocks against hmac.digest -------------------------------------


@pytest.mark.parametrize("key_len", [1, 16, 32, 63, 64, 65, 128, 1024])
def test_mac_key_tags_like_hmac_digest_for_every_key_length(key_len: int) -> None:
    key = bytes((7 * i + 3) % 256 for i in range(key_len))
    mac = codec.MacKey(key)
    for payload in (b"", b"\x00", bytes(range(256)) * 5, b"x" * 1184):
        assert mac.tag(payload) == hmac.digest(key, payload, "sha256")[:16]
        assert codec.mac(payload, key) == mac.tag(payload)


def test_the_receivers_decode_agrees_with_decode_datagram() -> None:
    mac = codec.MacKey(KEY)
    good = valid_messages()[0][2]
    sealed = codec.encode(good, KEY)
    for data in [
        sealed, sealed[:-1] + bytes([sealed[-1] ^ 1]), sealed[:16], b"x" * 1201,
        codec.seal(b"\x91\x01", KEY), codec.seal(payload_of(good) + b"\x00", KEY),
    ]:
        outcomes: list[Message | tuple[RejectReason, str]] = []
        for decode in (lambda d: codec.decode_datagram(d, KEY, SWARM_ID),
                       lambda d: codec.decode_checked(d, mac, SWARM_ID, 1200)):
            try:
                outcomes.append(decode(data))
            except SwarmDecodeError as e:
                outcomes.append((e.reject_reason, e.detail))
        assert outcomes[0] == outcomes[1]


@settings(max_examples=200, deadline=None)
@given(key=st.binary(min_size=1, max_size=200), payload=st.binary(max_size=1500))
def test_mac_key_tags_like_hmac_digest(key: bytes, payload: bytes) -> None:
    assert codec.MacKey(key).tag(payload) == hmac.digest(key, payload, "sha256")[:16]


# --- header and PATCH fields: the in-range shortcut against the field checks -----------------

numbers = st.sampled_from(
    [0, 1, -1, 2**32 - 1, 2**32, 65535, 65536, True, False, np.int64(5), np.uint32(2**32 - 1),
     0.0, -0.0, 1.5, 2.0**32, 2.0**32 - 1, -1e-300, math.nan, math.inf, -math.inf, "1", None]
) | st.integers(-(2**33), 2**33) | st.floats(-1e10, 1e10) | st.floats(allow_nan=True)


def field_outcome(check: Any) -> Any:
    try:
        return check()
    except FieldError as e:
        return str(e.reason), e.detail


def assert_header_agrees(header: list[Any]) -> None:
    swarm_id, sender, epoch, seq, t_sent = header

    def general() -> tuple[Any, ...]:
        return (
            int_field("swarm_id", swarm_id, 0, U32_MAX),
            text_field("sender", sender, 1, 32, is_name=True),
            int_field("epoch", epoch, 0, U32_MAX),
            int_field("seq", seq, 0, U32_MAX),
            time_field("t_sent", t_sent),
        )

    got = field_outcome(lambda: validate_header(*header))
    assert got == field_outcome(general)
    if isinstance(got[1], str) and isinstance(got[0], int):
        assert [type(v) for v in got] == [int, str, int, int, float]


VALID_HEADER = [123456, "walnut", 2**32 - 1, 7, 1.5]
EDGES = [-1, 0, 2**32 - 1, 2**32, True, np.int64(3), 1.0, -0.0, 2.0**32, math.nan, math.inf]


@pytest.mark.parametrize("index", [0, 2, 3, 4])
def test_validate_header_edges_agree_with_its_field_checks(index: int) -> None:
    for value in EDGES:
        header = list(VALID_HEADER)
        header[index] = value
        assert_header_agrees(header)


@settings(max_examples=400, deadline=None)
@given(
    replaced=st.dictionaries(st.sampled_from([0, 2, 3, 4]), numbers, max_size=2),
    sender=st.sampled_from(["walnut", "", "a" * 33, "bad name", 7]) | st.just("walnut"),
)
def test_validate_header_agrees_with_its_field_checks(
    replaced: dict[int, Any], sender: Any
) -> None:
    header = [*VALID_HEADER[:1], sender, *VALID_HEADER[2:]]  # valid but for what is replaced
    for i, value in replaced.items():
        header[i] = value
    assert_header_agrees(header)


@settings(max_examples=300, deadline=None)
@given(cell_size_mm=numbers, t_ref=numbers)
def test_patch_fields_agree_with_their_field_checks(cell_size_mm: Any, t_ref: Any) -> None:
    def fast() -> tuple[Any, Any]:
        patch = Patch(cell_size_mm, t_ref, Cells.empty())
        return patch.cell_size_mm, patch.t_ref

    got = field_outcome(fast)
    expected = field_outcome(
        lambda: (int_field("cell_size_mm", cell_size_mm, 1, 65535), time_field("t_ref", t_ref)))
    assert got == expected
    if not isinstance(got[0], str):
        assert (type(got[0]), type(got[1])) == (int, float)


def test_cells_stay_immutable() -> None:
    cells = Cells.from_arrays(np.arange(3), np.zeros(3, int), np.zeros(3), np.ones(3))
    for attr in ("ix", "iy", "mu", "var", "extra"):
        with pytest.raises(AttributeError):
            setattr(cells, attr, np.zeros(3))
    for a in (cells.ix, cells.iy, cells.mu, cells.var):
        with pytest.raises(ValueError):
            a[0] = 1
    part = cells.slice(1, 3)
    assert not part.ix.flags.writeable and part.to_bytes() == Cells(
        cells.ix[1:].copy(), cells.iy[1:].copy(), cells.mu[1:].copy(), cells.var[1:].copy()
    ).to_bytes()
