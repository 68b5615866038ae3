"""Mutations of valid messages and raw garbage, from a seeded :class:`random.Random` (reproducible).

Each mutation takes the JSON bytes (or the builtins tree) of a valid message and returns new payload bytes
and the mutation's name (the report groups by it). The tree mutations pick one leaf or object of the message
at random (:func:`_paths`), so every field of every message type is hit over a run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import msgspec

Path = tuple[str | int, ...]

WRONG_VALUES: tuple[Any, ...] = ("", "12", 1, -1, 1.5, True, None, [], {}, [1, "a"], {"a": 1})
HUGE: tuple[Any, ...] = (2**31, 2**50 + 1, 2**63 - 1, -(2**63), 2**64, 10**40, 1e308, -1e308, 1e-320)
ODD_STRINGS: tuple[str, ...] = ("", " ", "   ", "\t", "\n", "\u0000", "\u200b", "é", "e\u0301", "🙂", "\ud7ff",
                                "名前", "a" * 1000, "x.y", "*", ">", "../etc", "-leading", "UPPER", "a b")


def _paths(tree: Any, path: Path = ()) -> list[Path]:
    """Every path to a value inside ``tree`` (the root excluded)."""
    out: list[Path] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.append((*path, k))
            out.extend(_paths(v, (*path, k)))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.append((*path, i))
            out.extend(_paths(v, (*path, i)))
    return out


def _get(tree: Any, path: Path) -> Any:
    for p in path:
        tree = tree[p]
    return tree


def _set(tree: Any, path: Path, value: Any) -> None:
    _get(tree, path[:-1])[path[-1]] = value


def _pick(rng: random.Random, tree: Any, want: Callable[[Any], bool]) -> Path | None:
    paths = [p for p in _paths(tree) if want(_get(tree, p))]
    return rng.choice(paths) if paths else None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def wrong_type(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, lambda _: True)
    if path is not None:
        _set(tree, path, rng.choice(WRONG_VALUES))
    return tree


def huge_number(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, _is_number)
    if path is not None:
        _set(tree, path, rng.choice(HUGE))
    return tree


def negative_quantity(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, _is_number)
    if path is not None:
        v = _get(tree, path)
        _set(tree, path, -abs(v) if v else -1)
    return tree


def odd_string(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, lambda v: isinstance(v, str))
    if path is not None:
        _set(tree, path, rng.choice(ODD_STRINGS))
    return tree


def unknown_field(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, lambda v: isinstance(v, dict))
    target = _get(tree, path) if path is not None else tree
    if isinstance(target, dict):
        target[rng.choice(["zzz", "__proto__", "uid ", "UID", "x" * 40])] = rng.choice(WRONG_VALUES)
    return tree


def drop_field(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, lambda _: True)
    if path is not None and isinstance(_get(tree, path[:-1]), dict):
        del _get(tree, path[:-1])[path[-1]]
    return tree


DEEP = "\u0000deep\u0000"
"""Placeholder :func:`deep_nesting` leaves in the tree; :func:`mutate` writes the nesting as text (the
JSON encoders recurse and would stop at their own limit first)."""


def deep_nesting(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, lambda _: True)
    if path is None:
        return DEEP
    _set(tree, path, DEEP)
    return tree


def _nested(rng: random.Random) -> bytes:
    depth = rng.choice([50, 500, 5000, 100_000])
    if rng.random() < 0.5:
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def long_list(rng: random.Random, tree: Any) -> Any:
    path = _pick(rng, tree, lambda v: isinstance(v, list))
    if path is not None:
        v = _get(tree, path)
        _set(tree, path, (v or [0]) * rng.choice([100, 5000]))
    return tree


TREE_MUTATIONS: dict[str, Callable[[random.Random, Any], Any]] = {
    "wrong_type": wrong_type, "huge_number": huge_number, "negative_quantity": negative_quantity,
    "odd_string": odd_string, "unknown_field": unknown_field, "drop_field": drop_field,
    "deep_nesting": deep_nesting, "long_list": long_list,
}


def bit_flip(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def nan_inf(rng: random.Random, data: bytes) -> bytes:
    """A number of the payload replaced by NaN, Infinity (not JSON) or 1e999 (JSON, decodes as inf)."""
    text = data.decode()
    spots = [i for i, c in enumerate(text) if c.isdigit() and (i == 0 or not text[i - 1].isalnum())]
    if not spots:
        return data
    i = rng.choice(spots)
    j = i
    while j < len(text) and (text[j].isdigit() or text[j] in ".eE+-"):
        j += 1
    token = rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "nan"])
    return (text[:i] + token + text[j:]).encode()


BYTE_MUTATIONS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "bit_flip": bit_flip, "truncate": truncate, "nan_inf": nan_inf,
}


def mutate(rng: random.Random, valid: Any) -> tuple[str, bytes]:
    """``(mutation name, payload)``: one tree or byte mutation of the valid message ``valid`` (a Struct)."""
    data = msgspec.json.encode(valid)
    names = list(TREE_MUTATIONS) + list(BYTE_MUTATIONS)
    name = rng.choice(names)
    if name in BYTE_MUTATIONS:
        return name, BYTE_MUTATIONS[name](rng, data)
    tree = msgspec.to_builtins(valid)
    tree = TREE_MUTATIONS[name](rng, tree)
    try:
        data = msgspec.json.encode(tree)
    except (OverflowError, msgspec.EncodeError):  # 2**64 etc.: JSON text has no such limit
        data = json.dumps(tree).encode()
    if name == "deep_nesting":
        data = data.replace(msgspec.json.encode(DEEP), _nested(rng), 1)
    return name, data


def garbage(rng: random.Random) -> tuple[str, bytes]:
    """``(kind, payload)``: bytes that are no message: random, empty, other JSON values, invalid UTF-8."""
    kind = rng.choice(["random", "empty", "json_scalar", "json_array", "not_utf8", "bom", "whitespace",
                       "big"])
    if kind == "random":
        return kind, rng.randbytes(rng.randint(1, 200))
    if kind == "empty":
        return kind, b""
    if kind == "json_scalar":
        return kind, rng.choice([b"null", b"0", b"-1", b"true", b'"x"', b"1e999", b"NaN"])
    if kind == "json_array":
        return kind, rng.choice([b"[]", b"[{}]", b"[1,2,3]", b"[" * 100 + b"]" * 100])
    if kind == "not_utf8":
        return kind, b'{"uid": "' + rng.randbytes(8).replace(b'"', b"x") + b'\xff\xfe"}'
    if kind == "bom":
        return kind, b"\xef\xbb\xbf{}"
    if kind == "whitespace":
        return kind, rng.choice([b" ", b"\n\n", b"\t \r\n"])
    return kind, b'{"uid": "' + b"a" * rng.choice([70_000, 500_000]) + b'"}'
