"""Camera perception: AprilTag localization and target detection from the car's own frames.

- :mod:`.tagmap` — the map (wall tags, target, robot tags), the camera mount and the lens;
- :mod:`.detect` — tag36h11 detection (pupil-apriltags) and its gates;
- :mod:`.pose` — per-tag IPPE_SQUARE PnP with both solutions, ambiguity, covariances;
- :mod:`.consensus` — maximal-clique consensus over the poses the tags imply;
- :mod:`.pipeline` — one frame in, one :class:`~agents.observations.ObservationBatch` out;
- :mod:`.chain` — robots placed through robots that see each other's tags.

The driver that feeds frames from a car's MJPEG stream is :mod:`agents.drivers.camera`.
"""
