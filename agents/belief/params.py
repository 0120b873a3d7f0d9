"""Validated parameter sets for the belief estimators.

Every field has a default that works for the two-robot demo (10 Hz belief
tick, 0.1 m cells, a target moving at about 1 m/s). Construction fails with
``ValueError`` outside the documented range, so a bad scenario file is refused
before anything runs. Units: metres, seconds; grid ``mu`` and ``var`` are
dimensionless (a presence level in [0, 1] and its variance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agents.checks import require

CHI2_2DOF_99 = 9.21
"""99 % quantile of the chi-square distribution with 2 degrees of freedom."""

INT16_MAX = 32767
"""Largest lattice index: indices travel as int16 on the wire."""



def _positive(name: str, value: float) -> None:
    require(math.isfinite(value) and value > 0.0, f"{name} must be finite and > 0, got {value}")


def _non_negative(name: str, value: float) -> None:
    require(math.isfinite(value) and value >= 0.0, f"{name} must be finite and >= 0, got {value}")


@dataclass(frozen=True)
class GridParams:
    """Pheromone grid: window, per-cell Kalman noise, diffusion, decay, staleness, patches."""

    cell_size: float = 0.1
    """Lattice pitch c in metres; shared by every agent of a swarm."""
    width: int = 64
    """Window cells along x (W)."""
    height: int = 64
    """Window cells along y (H)."""
    var_max: float = 1.0
    """Prior (maximum) variance; entering cells start at (0, var_max)."""
    var_min: float = 1e-6
    """Floor on every variance, so repeated fusion can never reach 0 or underflow."""
    process_noise: float = 0.05
    """Q: variance added per second in PREDICT."""
    diffusivity: float = 0.02
    """Diffusion coefficient of mu in m²/s; the per-neighbour exchange rate is this / c²."""
    decay: float = 0.05
    """Evaporation rate of mu per second in DECAY (mu *= 1 - decay·dt)."""
    decay_noise: float = 0.01
    """Variance added per second in DECAY."""
    r_hit: float = 0.05
    """Measurement variance R of a positive cell (z = 1) at the detection's centre."""
    r_miss: float = 0.2
    """Measurement variance R of a searched-and-empty cell (z = 0)."""
    detection_gate: float = CHI2_2DOF_99
    """Mahalanobis gate (squared) of the cells a detection marks z = 1."""
    q_drift: float = 0.05
    """Staleness penalty: variance added to a peer's cell per second of age."""
    patch_mu_threshold: float = 0.1
    """A cell whose mu exceeds this is a candidate for every patch when it changed."""
    patch_mu_change: float = 0.02
    """|mu - mu_sent| above this counts as a change for a hot cell."""
    patch_var_change: float = 0.05
    """|var - var_sent| above this makes any cell worth sending."""

    def __post_init__(self) -> None:
        _positive("cell_size", self.cell_size)
        for name, n in (("width", self.width), ("height", self.height)):
            require(isinstance(n, int) and 3 <= n <= 4096, f"{name} must be an int in 3..4096")
        _positive("var_max", self.var_max)
        _positive("var_min", self.var_min)
        require(self.var_min < self.var_max, "var_min must be < var_max")
        _non_negative("process_noise", self.process_noise)
        _non_negative("diffusivity", self.diffusivity)
        _non_negative("decay", self.decay)
        _non_negative("decay_noise", self.decay_noise)
        _positive("r_hit", self.r_hit)
        _positive("r_miss", self.r_miss)
        _positive("detection_gate", self.detection_gate)
        _non_negative("q_drift", self.q_drift)
        _non_negative("patch_mu_threshold", self.patch_mu_threshold)
        _non_negative("patch_mu_change", self.patch_mu_change)
        _positive("patch_var_change", self.patch_var_change)

    @property
    def exchange_rate(self) -> float:
        """Per-neighbour exchange rate of mu, 1/s (diffusivity / c²)."""
        return self.diffusivity / (self.cell_size * self.cell_size)


@dataclass(frozen=True)
class TrackParams:
    """The track filter: an IMM of constant velocity and coordinated turn (agents/belief/track.py).

    The target's declared limits (``max_speed``, ``max_accel``: a site's ``[target]``,
    protocol/SITE.md) bound every prediction and set the process noises that are not
    given explicitly: the constant-velocity mode's white-acceleration density is
    ``max_accel² · cv_manoeuvre_time`` (a velocity change of ``max_accel`` over that
    time is one sigma), the turn mode's ``(ct_accel_fraction · max_accel)²·1 s``.
    """

    max_speed: float = 1.5
    """The target's maximum speed, m/s (a site's [target] max_speed overrides it)."""
    max_accel: float = 2.0
    """The target's maximum acceleration, m/s² (a site's [target] max_accel overrides it)."""
    cv_manoeuvre_time: float = 0.1
    """s: the constant-velocity mode's white-acceleration density is ``max_accel²`` times
    this (a velocity change of max_accel over this time is one sigma)."""
    ct_accel_fraction: float = 0.15
    """The coordinated-turn mode's residual acceleration density is ``(this · max_accel)²``
    per second."""
    turn_rate_psd: float = 0.05
    """Spectral density of the turn rate's random walk, rad²/s³."""
    sojourn_cv: float = 2.0
    """Mean time, s, the target keeps a constant velocity ..."""
    sojourn_ct: float = 4.0
    """... and keeps turning."""
    initial_turn: float = 0.5
    """Probability of the turn mode for a new track."""
    mode_floor: float = 1e-3
    """No mode probability drops below this (a mode never dies out)."""
    init_velocity_var: float = 4.0
    """Velocity variance (m/s)² per axis on (re-)initialisation (at most max_speed²)."""
    init_turn_rate_var: float = 1.0
    """Turn-rate variance (rad/s)² on (re-)initialisation."""
    pose_error_time: float = 1.0
    """s: correlation time of the robot's own pose error, the consider term of a detection."""
    target_radius: float = 0.075
    """m: the target's half-width; its centre stays this far from walls and obstacles."""
    gate: float = CHI2_2DOF_99
    """Chi-square gate on the normalised innovation squared (2 dof)."""
    max_consecutive_gated: int = 5
    """After this many gated detections in a row, re-initialise on the newest one."""
    max_measurement_lag: float = 1.0
    """s: measurements and fusions this recent are kept, so a late detection is processed
    exactly at its time; an older one is refused as stale."""
    peak_min_mu: float = 0.5
    """A grid peak counts as a target sighting (the replay's grid-peak error) from this mu."""
    ci_criterion: str = "trace"
    """What peer fusion's ω minimises: "trace" or "det"."""

    def __post_init__(self) -> None:
        _positive("max_speed", self.max_speed)
        _positive("max_accel", self.max_accel)
        _positive("cv_manoeuvre_time", self.cv_manoeuvre_time)
        _positive("ct_accel_fraction", self.ct_accel_fraction)
        _non_negative("turn_rate_psd", self.turn_rate_psd)
        _positive("sojourn_cv", self.sojourn_cv)
        _positive("sojourn_ct", self.sojourn_ct)
        require(math.isfinite(self.initial_turn) and 0.0 <= self.initial_turn <= 1.0,
                "initial_turn must be in [0, 1]")
        require(math.isfinite(self.mode_floor) and 0.0 <= self.mode_floor < 0.5,
                "mode_floor must be in [0, 0.5)")
        _positive("init_velocity_var", self.init_velocity_var)
        _positive("init_turn_rate_var", self.init_turn_rate_var)
        _positive("pose_error_time", self.pose_error_time)
        _non_negative("target_radius", self.target_radius)
        _positive("gate", self.gate)
        require(
            isinstance(self.max_consecutive_gated, int) and self.max_consecutive_gated >= 1,
            "max_consecutive_gated must be an int >= 1",
        )
        _non_negative("max_measurement_lag", self.max_measurement_lag)
        _non_negative("peak_min_mu", self.peak_min_mu)
        require(self.ci_criterion in ("trace", "det"), "ci_criterion must be 'trace' or 'det'")

    @property
    def q_cv(self) -> float:
        """White-acceleration density of the constant-velocity mode, m²/s³."""
        return self.max_accel**2 * self.cv_manoeuvre_time

    @property
    def accel_psd(self) -> float:
        """q, m²/s³, of the constant-velocity prediction of a published 4-state track: the wire
        carries no mode, so a peer's track (and the replay's) is predicted with the CV mode."""
        return self.q_cv

    @property
    def q_ct(self) -> float:
        """White-acceleration density of the coordinated-turn mode, m²/s³."""
        return (self.ct_accel_fraction * self.max_accel) ** 2

    @property
    def sojourn(self) -> tuple[float, float]:
        """Mean sojourn times of the modes (constant velocity, coordinated turn), s."""
        return (self.sojourn_cv, self.sojourn_ct)

    @property
    def initial_modes(self) -> tuple[float, float]:
        """Mode probabilities of a new track (constant velocity, coordinated turn)."""
        return (1.0 - self.initial_turn, self.initial_turn)


@dataclass(frozen=True)
class ReputationParams:
    """Beta reputation with forgetting."""

    forgetting: float = 0.9
    """λ: weight of the past counts on every check (0 < λ < 1)."""
    prior_alpha: float = 4.0
    """Pseudo-count of passes added to every score (never forgotten)."""
    prior_beta: float = 1.0
    """Pseudo-count of failures added to every score (never forgotten)."""
    threshold: float = 0.5
    """A peer whose score is below this is not fused."""
    gate: float = CHI2_2DOF_99
    """Chi-square gate of the position consistency test (2 dof)."""
    confident_trace: float = 0.1
    """The witness is a reference only if the trace of its position covariance (m²) is at most
    this."""
    witness_max_age: float = 1.0
    """s: ... and only if its newest own detection is at most this old."""
    view_horizon: float = 2.0
    """s: own views kept for negative evidence."""
    view_window: float = 0.5
    """s: a claim is confronted with the own views at most this far from its time."""
    claim_floor: float = 0.1
    """m: added (in quadrature) to a claim's spread, so a claim tighter than the own camera's
    view of it is not refuted by the camera's own error."""
    min_refuting_views: int = 2
    """Own frames that must have seen the claimed place empty to refute a claim."""
    support_distance: float = 0.3
    """m: an own detection this far beyond a claim's disc still counts as seeing the target
    there (and refutes nothing)."""
    hot_mu: float = 0.5
    """A PATCH cell is a claim of the target's presence from this mu ..."""
    hot_var: float = 0.25
    """... with a var at most this ..."""
    hot_rise: float = 0.05
    """... and a mu that rose by at least this since the peer's previous PATCH of it."""
    min_refuted_cells: int = 2
    """A PATCH fails only if at least this many of its hot cells were refuted."""
    verify_time: float = 4.0
    """s: a disputed claim that no own evidence bears on is looked at (the navigator turns
    the camera to it) for at most this long per dispute, counted from the last own view
    that bore on the peer's claims (a place being seen is no unreachable place); 0: never."""

    def __post_init__(self) -> None:
        require(
            math.isfinite(self.forgetting) and 0.0 < self.forgetting < 1.0,
            "forgetting must be in (0, 1)",
        )
        _positive("prior_alpha", self.prior_alpha)
        _positive("prior_beta", self.prior_beta)
        require(0.0 < self.threshold < 1.0, "threshold must be in (0, 1)")
        require(
            self.prior_alpha / (self.prior_alpha + self.prior_beta) >= self.threshold,
            "the prior score must be fusable "
            "(prior_alpha / (prior_alpha + prior_beta) >= threshold)",
        )
        require(
            self.prior_alpha / (self.prior_alpha + self.prior_beta + 1.0 / (1.0 - self.forgetting))
            < self.threshold,
            "a peer that fails every check must end below threshold "
            "(prior_alpha / (prior_alpha + prior_beta + 1/(1-forgetting)) < threshold)",
        )
        _positive("gate", self.gate)
        _positive("confident_trace", self.confident_trace)
        _positive("witness_max_age", self.witness_max_age)
        _positive("view_horizon", self.view_horizon)
        _positive("view_window", self.view_window)
        _non_negative("claim_floor", self.claim_floor)
        _non_negative("support_distance", self.support_distance)
        _non_negative("verify_time", self.verify_time)
        for name in ("min_refuting_views", "min_refuted_cells"):
            value = getattr(self, name)
            require(isinstance(value, int) and value >= 1, f"{name} must be an int >= 1")
        require(0.0 < self.hot_mu <= 1.0, "hot_mu must be in (0, 1]")
        _positive("hot_var", self.hot_var)
        _non_negative("hot_rise", self.hot_rise)
