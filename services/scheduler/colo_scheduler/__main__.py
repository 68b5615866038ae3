"""``python -m colo_scheduler``: run the scheduler service (settings from ``COLO_SCHEDULER_*``)."""

from __future__ import annotations

from colo.runtime import main
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

if __name__ == "__main__":
    main(SchedulerService, SchedulerSettings, "COLO_SCHEDULER")
