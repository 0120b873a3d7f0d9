"""``python -m tools.experiments.evidence [--quick]``: see the package's docstring."""

import sys

from tools.experiments.evidence.main import main

sys.exit(main())
