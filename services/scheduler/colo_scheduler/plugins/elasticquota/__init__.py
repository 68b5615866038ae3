"""Elastic quota: the runtime quota calculator, the quota tree, the scheduler's quota book, reclaiming lent
quota and the ElasticQuota plugin (REFERENCE.md §8; docs/quota.md)."""

from colo_scheduler.plugins.elasticquota.plugin import QUOTA_CHANGE, ElasticQuota

__all__ = ["QUOTA_CHANGE", "ElasticQuota"]
