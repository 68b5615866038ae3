"""Naming a pod as kubectl users do (the CLI and the REST API): ``NAME -n NAMESPACE``, ``NAMESPACE/NAME`` or its uid."""

from __future__ import annotations

from colo.messages import PodRecord


class RefError(LookupError):
    """No object, or more than one, matches what was named; the message says which and why."""


def split_ref(ref: str, namespace: str = "") -> tuple[str, str]:
    """``(namespace, name)`` of ``ref``: ``NAMESPACE/NAME`` is split; a bare NAME keeps ``namespace`` ("" = any)."""
    if "/" in ref and not namespace:
        ns, _, name = ref.partition("/")
        return ns, name
    return namespace, ref


def select_pods(records: list[PodRecord], ref: str = "", namespace: str = "") -> list[PodRecord]:
    """The records ``colo get pods [REF] [-n NS]`` shows: every pod of ``namespace`` ("" = all) without ``ref``;
    with ``ref`` exactly one pod, found by uid, else by name (in ``namespace``, or ``NAMESPACE/NAME``, or in
    whichever namespace holds the only pod of that name).

    Raises RefError when no pod matches (naming the namespaces that hold a pod of that name when another one was
    asked), or a bare name matches pods of several namespaces (naming them)."""
    if not ref:
        return [r for r in records if not namespace or r.spec.namespace == namespace]
    by_uid = [r for r in records if r.spec.uid == ref and (not namespace or r.spec.namespace == namespace)]
    if by_uid:
        return by_uid[:1]
    ns, name = split_ref(ref, namespace)
    found = [r for r in records if r.spec.name == name and (not ns or r.spec.namespace == ns)]
    if not found:
        where = f" in namespace {ns!r}" if ns else ""
        elsewhere = sorted({r.spec.namespace for r in records if r.spec.name == name}) if ns else []
        hint = (f"; a pod of that name is in namespace{'s' if len(elsewhere) > 1 else ''} {', '.join(elsewhere)}: "
                f"-n {elsewhere[0]}" if elsewhere else "")
        raise RefError(f"no pod {name!r}{where} in the store (by name or uid){hint}")
    if len(found) > 1:
        spaces = sorted({r.spec.namespace for r in found})
        if len(spaces) > 1:
            raise RefError(f"pod {name!r} is in several namespaces ({', '.join(spaces)}): "
                           f"name one with -n NAMESPACE or NAMESPACE/{name}")
    return found[:1]
