"""``python -m colo_api``: run the API service (settings from ``COLO_*`` and ``COLO_API_*``)."""

from __future__ import annotations

from colo.runtime import main
from colo_api.service import ApiService
from colo_api.settings import ENV_PREFIX, ApiSettings


def run() -> None:
    """Load settings, build the service, run until SIGTERM/SIGINT (exit 2 on invalid settings)."""
    main(ApiService, ApiSettings, ENV_PREFIX)


if __name__ == "__main__":
    run()
