"""``python -m colo_profiler``: run the profiler (settings from ``COLO_*`` and ``COLO_PROFILER_*``)."""

from __future__ import annotations

from colo.runtime import main
from colo_profiler.service import ProfilerService
from colo_profiler.settings import ENV_PREFIX, ProfilerSettings


def run() -> None:
    """Load settings, build the service, run until SIGTERM/SIGINT (exit 2 on invalid settings)."""
    main(ProfilerService, ProfilerSettings, ENV_PREFIX)


if __name__ == "__main__":
    run()
