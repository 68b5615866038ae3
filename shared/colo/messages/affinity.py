"""Kubernetes node affinity of a pod: selector requirements, terms, required and preferred affinity.

The rules that evaluate them are in :mod:`colo.affinity`.
"""

from __future__ import annotations

from colo.messages.base import Message


class NodeSelectorRequirement(Message, frozen=True):
    """One label test of a node selector term (Kubernetes NodeSelectorRequirement).

    ``operator``: ``In`` / ``NotIn`` (``values`` non-empty; NotIn also matches a node without the
    key), ``Exists`` / ``DoesNotExist`` (no values), ``Gt`` / ``Lt`` (exactly one integer value,
    compared with the node's label parsed as a base-10 int64; a node whose label does not parse
    does not match). Kept as a plain string so that a pod with a bad operator still decodes and
    is rejected with a clear reason (:func:`colo.affinity.affinity_problems`).
    """

    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(Message, frozen=True):
    """Expressions ANDed; a term without expressions matches no node (Kubernetes NodeSelectorTerm)."""

    match_expressions: list[NodeSelectorRequirement] = []


class NodeSelector(Message, frozen=True):
    """Terms ORed (Kubernetes NodeSelector); at least one term is required."""

    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(Message, frozen=True):
    """A preferred term and its ``weight`` 1..100 (Kubernetes PreferredSchedulingTerm)."""

    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(Message, frozen=True):
    """Kubernetes NodeAffinity: ``required`` (requiredDuringSchedulingIgnoredDuringExecution; None =
    no requirement) and ``preferred`` (preferredDuringSchedulingIgnoredDuringExecution)."""

    required: NodeSelector | None = None
    preferred: list[PreferredSchedulingTerm] = []


class Affinity(Message, frozen=True):
    """A pod's affinity (Kubernetes Affinity); only node affinity for now."""

    node_affinity: NodeAffinity | None = None
