"""``python -m colo_descheduler``: run the descheduler (settings from ``COLO_*`` and ``COLO_DESCHEDULER_*``)."""

from __future__ import annotations

from colo.runtime import main
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import ENV_PREFIX, DeschedulerSettings


def run() -> None:
    """Load settings, build the service, run until SIGTERM/SIGINT (exit 2 on invalid settings)."""
    main(DeschedulerService, DeschedulerSettings, ENV_PREFIX)


if __name__ == "__main__":
    run()
