"""``python -m colo_slo_manager``: run the slo-manager (settings from ``COLO_*`` and ``COLO_SLO_MANAGER_*``)."""

from __future__ import annotations

from colo.runtime import main
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import ENV_PREFIX, SloManagerSettings


def run() -> None:
    """Load settings, build the service, run until SIGTERM/SIGINT (exit 2 on invalid settings)."""
    main(SloManagerService, SloManagerSettings, ENV_PREFIX)


if __name__ == "__main__":
    run()
