"""``python -m colo_scheduler``: run the scheduler service (settings from ``COLO_SCHEDULER_*``, the profile
checked with them: :mod:`colo_scheduler.profiles`)."""

from __future__ import annotations

from colo.runtime import main
from colo_scheduler.profiles import ValidatedSchedulerSettings
from colo_scheduler.service import SchedulerService

if __name__ == "__main__":
    main(SchedulerService, ValidatedSchedulerSettings, "COLO_SCHEDULER")
