"""Coscheduling: gang scheduling (pod groups with a minimum member count, a wait timeout, Strict or
NonStrict mode, and gang groups); see :mod:`.plugin`."""

from colo_scheduler.plugins.coscheduling.cache import Gang, GangCache, group_key, group_of
from colo_scheduler.plugins.coscheduling.plugin import EVENTS, MEMBERS_REJECTOR, NAME, Coscheduling

__all__ = ["EVENTS", "MEMBERS_REJECTOR", "NAME", "Coscheduling", "Gang", "GangCache", "group_key", "group_of"]
