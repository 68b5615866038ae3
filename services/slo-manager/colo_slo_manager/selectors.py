"""Kubernetes label keys and values, and label selectors, as the slo-manager's settings use them (colocation
profiles, node pools)."""

from __future__ import annotations

import re
from typing import Literal

from colo_slo_manager.settings_base import SettingsStruct

_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label Kubernetes puts on every Namespace, holding its name: the only namespace label Colo knows."""

SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
"""Kubernetes ``LabelSelectorOperator``."""


def label_problems(where: str, labels: dict[str, str]) -> list[str]:
    """Keys and values of ``labels`` that are not valid Kubernetes label keys/values."""
    out: list[str] = []
    for k, v in labels.items():
        if not _LABEL_KEY.fullmatch(k):
            out.append(f"{where}: {k!r} is not a valid label key")
        if not _LABEL_VALUE.fullmatch(v):
            out.append(f"{where}: {v!r} (key {k!r}) is not a valid label value")
    return out


class LabelSelectorRequirement(SettingsStruct, frozen=True):
    """One test of a label selector (Kubernetes ``LabelSelectorRequirement``): ``In`` / ``NotIn`` the
    ``values`` (NotIn also matches when the key is absent), ``Exists`` / ``DoesNotExist`` (no values)."""

    key: str
    """Label key tested."""
    operator: SelectorOperator
    """``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``."""
    values: list[str] = []
    """Values for ``In`` / ``NotIn`` (at least one); empty for ``Exists`` / ``DoesNotExist``."""

    def problems(self) -> list[str]:
        """Every problem of the requirement (Kubernetes ValidateLabelSelectorRequirement)."""
        out: list[str] = []
        if not _LABEL_KEY.fullmatch(self.key):
            out.append(f"{self.key!r} is not a valid label key")
        if self.operator in ("In", "NotIn") and not self.values:
            out.append(f"key {self.key!r}: operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            out.append(f"key {self.key!r}: operator {self.operator} takes no values")
        out += [f"key {self.key!r}: {v!r} is not a valid label value" for v in self.values
                if not _LABEL_VALUE.fullmatch(v)]
        return out

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether ``labels`` satisfy the requirement (Kubernetes ``labels.Requirement.Matches``)."""
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


class LabelSelector(SettingsStruct, frozen=True):
    """A Kubernetes ``LabelSelector``: every ``match_labels`` pair and every requirement must hold;
    an empty selector matches everything."""

    match_labels: dict[str, str] = {}
    """Labels that must be present with these values."""
    match_expressions: list[LabelSelectorRequirement] = []
    """Requirements, ANDed."""

    def problems(self) -> list[str]:
        """Invalid label keys or values in ``match_labels``."""
        return label_problems("match_labels", self.match_labels)

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether ``labels`` satisfy the selector."""
        return (all(labels.get(k) == v for k, v in self.match_labels.items())
                and all(r.matches(labels) for r in self.match_expressions))

    @property
    def keys(self) -> set[str]:
        """Every label key the selector tests."""
        return set(self.match_labels) | {r.key for r in self.match_expressions}
