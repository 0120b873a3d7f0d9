"""Belief estimators: the pheromone grid, fusion rules, the track filter, reputation.

Pure numpy/scipy maths: no sockets, no clocks, no protocol imports. Time comes
in as ``now`` or ``dt`` (seconds); the agent converts wire messages to arrays.
"""

from agents.belief.constraints import FreeSpace, constrain
from agents.belief.deposit import Detection, Footprint
from agents.belief.fusion import (
    FusionRule,
    MatrixFusion,
    ci_criterion_value,
    ci_matrix,
    ci_scalar,
    max_confidence_scalar,
    naive_matrix,
    naive_scalar,
)
from agents.belief.grid import CellBlock, GridPeak, PheromoneGrid
from agents.belief.lattice import cell_centre, cell_index, global_to_local, origin_for
from agents.belief.models import (
    ConstantVelocity,
    CoordinatedTurn,
    MotionModel,
    cv_predict,
    cv_process_noise,
    cv_transition,
)
from agents.belief.params import CHI2_2DOF_99, GridParams, ReputationParams, TrackParams
from agents.belief.reputation import (
    CheckOutcome,
    PositionClaim,
    Reason,
    ReputationTable,
    position_nis,
)
from agents.belief.track import TrackFilter
from agents.belief.track_results import PeerFusion, UpdateReason, UpdateResult
from agents.belief.views import View, ViewEvidence, ViewHistory

__all__ = [
    "CHI2_2DOF_99",
    "CellBlock",
    "CheckOutcome",
    "ConstantVelocity",
    "CoordinatedTurn",
    "Detection",
    "Footprint",
    "FreeSpace",
    "FusionRule",
    "GridParams",
    "GridPeak",
    "MatrixFusion",
    "MotionModel",
    "PeerFusion",
    "PheromoneGrid",
    "PositionClaim",
    "Reason",
    "ReputationParams",
    "ReputationTable",
    "TrackFilter",
    "TrackParams",
    "UpdateReason",
    "UpdateResult",
    "View",
    "ViewEvidence",
    "ViewHistory",
    "cell_centre",
    "cell_index",
    "ci_criterion_value",
    "ci_matrix",
    "ci_scalar",
    "constrain",
    "cv_predict",
    "cv_process_noise",
    "cv_transition",
    "global_to_local",
    "max_confidence_scalar",
    "naive_matrix",
    "naive_scalar",
    "origin_for",
    "position_nis",
]
