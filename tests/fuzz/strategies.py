"""Hypothesis strategies for msgspec message types, built from :func:`msgspec.inspect.type_info`.

``hypothesis.strategies.from_type`` knows nothing of msgspec Structs (defaults, ``omit_defaults``, Meta
constraints), so :func:`wire_values` walks the type tree itself and draws *wire values*: the JSON builtins a
client could publish (dicts, lists, strings, numbers, None), not Structs. Most draws have the declared shape;
some break it on purpose, so that the decoder's refusal path is exercised as much as the handlers:

* a constrained number or string (``Meta(ge=…, max_length=…)``) is drawn inside its bounds, sometimes
  outside them;
* an optional field is present or omitted; a required field is sometimes left out; an unknown field is
  sometimes added;
* a value is sometimes of a wrong JSON type altogether (a string where an int goes, a list for a struct);
* a ``Literal`` is usually one of its values, sometimes another string.

Whether a draw is valid is not tracked here: the fuzz harness asks the real decoder (``colo.codec.decode``).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

MAX_INT64 = 2**63 - 1

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                         st.text(max_size=8))
"""Any JSON scalar: a wrong-typed value for a field."""

ODD_TEXT = st.one_of(
    st.just(""), st.just(" "), st.just("\t\n"), st.just("\u200b"), st.just("ß\u0301🙂"), st.just("../.."),
    st.just("a" * 300), st.just("x.y.*.>"), st.text(max_size=24),
)
"""Strings that identifiers and subject tokens must survive: empty, blank, zero-width, combining marks,
emoji, path and subject wildcards, longer than a Kubernetes name."""

HUGE_NUMBERS = st.sampled_from([-1, -(2**31), 2**31, 2**50 + 1, MAX_INT64, -MAX_INT64 - 1, 2**64, 10**30,
                                1e300, -1e300, 1e-320])
"""Numbers at and past int32/int64/float limits (JSON has no NaN or inf: the mutations write those)."""


def wire_values(type_: Any) -> st.SearchStrategy[Any]:
    """Wire values for ``type_`` (a msgspec Struct class or any type msgspec decodes).

    Returns a strategy of JSON builtins: two draws in three of the declared shape (every field of its type,
    Literal values, Meta bounds mostly kept, unknown fields now and then), one in three with shapes broken as
    the module docstring says. Raises TypeError for a type this builder does not cover (a new field type:
    extend :func:`_for`).
    """
    info = mi.type_info(type_)
    shaped, broken = _for(info, 0, False), _for(info, 0, True)
    return st.one_of(shaped, shaped, broken)


def _wrong_or(good: st.SearchStrategy[Any], depth: int, b: bool) -> st.SearchStrategy[Any]:
    """``good`` most of the time, else a value of another JSON type (deep trees: mostly good)."""
    if depth > 3 or not b:
        return good
    return st.one_of(good, good, good, good, good, good, JSON_SCALARS)


def _for(t: mi.Type, depth: int, b: bool) -> st.SearchStrategy[Any]:
    if isinstance(t, mi.Metadata):
        return _for(t.type, depth, b)
    if isinstance(t, mi.StructType):
        return _struct(t, depth, b)
    if isinstance(t, mi.UnionType):
        return st.one_of(*(_for(x, depth, b) for x in t.types))
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.BoolType):
        return _wrong_or(st.booleans(), depth, b)
    if isinstance(t, mi.IntType):
        return _wrong_or(_int(t, b), depth, b)
    if isinstance(t, mi.FloatType):
        return _wrong_or(_float(t, b), depth, b)
    if isinstance(t, mi.StrType):
        return _wrong_or(_str(t, b), depth, b)
    if isinstance(t, mi.LiteralType):
        return _wrong_or(st.one_of(st.sampled_from(list(t.values)), st.sampled_from(list(t.values)),
                                   st.text(max_size=6)) if b else st.sampled_from(list(t.values)), depth, b)
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return _wrong_or(_list(t.item_type, t.min_length, t.max_length, depth, b), depth, b)
    if isinstance(t, mi.TupleType):
        return _wrong_or(st.tuples(*(_for(x, depth + 1, b) for x in t.item_types)).map(list), depth, b)
    if isinstance(t, mi.DictType):
        return _wrong_or(_dict(t, depth, b), depth, b)
    if isinstance(t, mi.AnyType):
        return JSON_SCALARS
    raise TypeError(f"no wire strategy for {t!r}")


def _struct(t: mi.StructType, depth: int, b: bool) -> st.SearchStrategy[Any]:
    if depth > 6:  # recursive or very deep types: the smallest value that can still decode
        return st.just({f.encode_name: None for f in t.fields if f.required})
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in t.fields:
        value = _for(f.type, depth + 1, b)
        if f.required and b:
            # a required field is sometimes missing (_MISSING marks it, dropped in _drop_missing)
            fields[f.encode_name] = st.one_of(value, value, value, value, value, value, value, st.just(_MISSING))
        elif f.required:
            fields[f.encode_name] = value
        else:
            fields[f.encode_name] = st.one_of(st.just(_MISSING), value)
    unknown = st.dictionaries(st.text(min_size=1, max_size=8), JSON_SCALARS, max_size=2)
    built = st.fixed_dictionaries(fields).map(_drop_missing)
    with_unknown = st.tuples(built, unknown).map(lambda p: {**p[1], **p[0]})
    return st.one_of(built, built, built, with_unknown)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()


def _drop_missing(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not _MISSING}


def _int(t: mi.IntType, b: bool) -> st.SearchStrategy[int]:
    lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else None)
    hi = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else None)
    inside = st.integers(min_value=lo, max_value=hi)
    if t.multiple_of:
        m = t.multiple_of
        inside = inside.map(lambda v: v - v % m)
    plain = st.integers(min_value=-(2**40), max_value=2**40)
    if lo is None and hi is None:
        return st.one_of(plain, plain, plain, HUGE_NUMBERS.filter(lambda v: isinstance(v, int)))
    return st.one_of(inside, inside, inside, plain) if b else inside  # outside the Meta bounds now and then


def _float(t: mi.FloatType, b: bool) -> st.SearchStrategy[float]:
    lo = t.ge if t.ge is not None else t.gt
    hi = t.le if t.le is not None else t.lt
    inside = st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False,
                       exclude_min=t.gt is not None, exclude_max=t.lt is not None)
    plain = st.floats(allow_nan=False, allow_infinity=False)
    small = st.floats(min_value=-1e4, max_value=1e6, allow_nan=False)
    if not b and (lo is not None or hi is not None):
        return inside
    return st.one_of(inside, small, small, plain, HUGE_NUMBERS.map(float).filter(math.isfinite))


def _str(t: mi.StrType, b: bool) -> st.SearchStrategy[str]:
    inside = st.text(min_size=t.min_length or 0, max_size=min(t.max_length or 16, 64))
    if t.pattern:
        inside = st.from_regex(t.pattern, fullmatch=True)
    ident = st.from_regex(r"[a-z][a-z0-9\-]{0,10}", fullmatch=True)
    return st.one_of(inside, ident, ident, ident, ODD_TEXT)


def _list(item: mi.Type, min_len: int | None, max_len: int | None, depth: int, b: bool) -> st.SearchStrategy[list[Any]]:
    hi = 4 if depth > 2 else 8
    inside = st.lists(_for(item, depth + 1, b), min_size=min_len or 0,
                      max_size=min(max_len, hi) if max_len is not None else hi)
    if b and (min_len or max_len is not None):  # the length bounds are broken now and then
        return st.one_of(inside, inside, inside, st.lists(_for(item, depth + 1, b), max_size=hi + 4))
    return inside


def _dict(t: mi.DictType, depth: int, b: bool) -> st.SearchStrategy[dict[Any, Any]]:
    key = st.one_of(st.from_regex(r"[a-z][a-z0-9./\-]{0,12}", fullmatch=True), ODD_TEXT)  # JSON keys are strings
    return st.dictionaries(key, _for(t.value_type, depth + 1, b), max_size=4 if depth > 2 else 6)


def encode(value: Any) -> bytes:
    """JSON bytes of a wire value (msgspec's encoder: the bytes a client would send)."""
    return msgspec.json.encode(value)
