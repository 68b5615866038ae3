"""``python -m colo.sim``: the demo (see :mod:`colo.sim.demo`)."""

import sys

from colo.sim.demo import main

sys.exit(main())
