"""The tag map: a site's measured entries give transforms, unmeasured ones give nothing."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from agents.perception.tagmap import (
    CameraMount,
    Intrinsics,
    RobotTag,
    TagMap,
    TagRole,
    Transform,
    WorldTag,
    load_intrinsics,
    map_from_site,
)
from protocol.site import parse_site
from protocol.tomlfile import FileError
from tools.agent_config import simulated_tag_map
from worlds.arena import load_arena, shipped_arena

SITE = """\
name = "lab"

[room]
size = [5.0, 5.0]

[target]
tag_id = 100
size = 0.12

[[tags]]
id = 0
x = 0.625
y = 0.0
z = 0.21
yaw_deg = 90
size = 0.2

[[tags]]          # surveyed once, never confirmed
id = 1
x = 1.875
y = 0.0
z = 0.21
yaw_deg = 90
size = 0.2
measured = false

[[robot_tags]]
robot = "hazel"
tag_id = 200
size = 0.08
forward = -0.06
left = 0.0
height = 0.12
yaw_deg = 180
"""

CALIBRATION = """\
[camera]
width = 320
height = 240
fx = 251.5
fy = 250.5
cx = 161.0
cy = 119.0
dist = [-0.11, 0.018, 0.0, 0.0, 0.0]
rms_px = 0.4
views = 17
"""
CAMERA = Intrinsics(320, 240, 250.0, 250.0, 160.0, 120.0)


def test_site_map_only_measured_entries_have_transforms():
    tag_map = map_from_site(parse_site(SITE), CAMERA, CameraMount(0.05, 0.2, measured=True))
    T = tag_map.world_transform(0)
    assert T is not None
    np.testing.assert_allclose(T.t, [0.625, 0.0, 0.21])
    assert tag_map.tags[1].x == 1.875 and tag_map.world_transform(1) is None
    assert tag_map.landmarks() == {0: (0.625, 0.0)}
    assert tag_map.role(1) is TagRole.WORLD and tag_map.role(100) is TagRole.TARGET
    assert tag_map.role(200) is TagRole.ROBOT and tag_map.role(7) is TagRole.UNKNOWN
    assert tag_map.robot_tags[200].transform() is not None
    assert tag_map.target is not None and tag_map.target.axis_offset == pytest.approx(0.075)


def test_unmeasured_entries_never_become_an_identity():
    assert WorldTag(5, 0.2, 1.0, 2.0, 0.2, 0.0, measured=False).transform() is None
    assert WorldTag(5, 0.2, measured=True).transform() is None  # measured but incomplete
    assert CameraMount(0.05, 0.2125).transform() is None  # measured defaults to false
    assert CameraMount(0.05, 0.2125, measured=True).transform() is not None
    assert RobotTag("hazel", 200, 0.08, 0.0, 0.0, 0.1, 0.0).transform() is None


def test_simulated_map_keeps_the_measured_flags():
    arena = load_arena(shipped_arena("three_cars"))
    tag_map = simulated_tag_map(arena)
    assert not tag_map.tags[50].measured and not tag_map.tags[51].measured
    assert tag_map.world_transform(50) is None and tag_map.world_transform(51) is None
    assert 50 not in tag_map.landmarks()
    assert tag_map.world_transform(0) is not None
    assert tag_map.mount.transform() is not None  # exact in simulation
    assert tag_map.target is not None and tag_map.target.axis_offset == pytest.approx(0.075)
    assert tag_map.camera.dist == (-0.12, 0.02, 0.0, 0.0)


def test_tag_frame_conventions():
    """x to the viewer's right, y down, z into the wall; the camera looks along the car's x."""
    tag_map = simulated_tag_map(load_arena(shipped_arena("two_cars")))
    T = tag_map.world_transform(0)  # south wall, facing +y
    assert T is not None
    np.testing.assert_allclose(T.R @ [1, 0, 0], [-1, 0, 0], atol=1e-12)  # viewer at +y looks -y
    np.testing.assert_allclose(T.R @ [0, 1, 0], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(T.R @ [0, 0, 1], [0, -1, 0], atol=1e-12)
    assert np.linalg.det(T.R) == pytest.approx(1.0)
    M = tag_map.mount.transform()
    assert M is not None
    np.testing.assert_allclose(M.R @ [0, 0, 1], [1, 0, 0], atol=1e-12)  # optical axis forward
    np.testing.assert_allclose(M.t, [0.05, 0.0, 0.2125])
    pitched = CameraMount(0.05, 0.2, pitch=math.radians(10), measured=True).transform()
    assert pitched is not None and (pitched.R @ [0, 0, 1])[2] < -0.17  # pitch > 0 looks down


def test_transform_algebra():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = Transform(_rotation(rng), rng.normal(size=3))
        b = Transform(_rotation(rng), rng.normal(size=3))
        p = rng.normal(size=3)
        np.testing.assert_allclose((a @ b).apply(p), a.apply(b.apply(p)), atol=1e-12)
        np.testing.assert_allclose((a @ a.inverse()).R, np.eye(3), atol=1e-12)


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def test_calibration_file_round_trip(tmp_path: Path):
    path = tmp_path / "cam.toml"
    path.write_text(CALIBRATION)
    cam = load_intrinsics(path)
    assert (cam.width, cam.height, cam.cx, cam.cy) == (320, 240, 161.0, 119.0)
    assert cam.dist[:2] == (-0.11, 0.018)
    (tmp_path / "bad.toml").write_text(CALIBRATION.replace("dist = [", "dist = [1, "))
    with pytest.raises(FileError, match="4, 5 or 8"):
        load_intrinsics(tmp_path / "bad.toml")
    (tmp_path / "typo.toml").write_text(CALIBRATION.replace("rms_px =", "rms_pxx ="))
    with pytest.raises(FileError, match=r"typo.toml:9: camera.rms_pxx: unknown key \(did you "
                       r"mean 'rms_px'\?\)"):
        load_intrinsics(tmp_path / "typo.toml")


def test_ids_shared_between_roles_are_refused():
    cam_map = simulated_tag_map(load_arena(shipped_arena("two_cars")))
    with pytest.raises(ValueError, match="more than one"):
        TagMap(cam_map.camera, cam_map.mount, cam_map.tags, cam_map.target,
               {0: RobotTag("hazel", 0, 0.08)})  # fmt: skip
