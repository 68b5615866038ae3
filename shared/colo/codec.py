"""JSON codec for wire messages (msgspec).

Encoding is deterministic (struct field order). Decoding validates types and
raises :class:`DecodeError` with a reason suitable for a dead letter.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


class DecodeError(ValueError):
    """A payload that is not valid JSON or does not match the expected message type."""


def encode(msg: Any) -> bytes:
    """Encode a message (or any msgspec-encodable value) to JSON bytes."""
    return _encoder.encode(msg)


_decoders: dict[object, msgspec.json.Decoder[Any]] = {}


def _decoder(type_: type[T]) -> msgspec.json.Decoder[T]:
    """The cached decoder for ``type_`` (one per message type per process)."""
    dec = _decoders.get(type_)
    if dec is None:
        dec = msgspec.json.Decoder(type_)
        _decoders[type_] = dec
    return dec


def decode(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON ``data`` into ``type_``.

    Raises DecodeError naming the offending field path when the payload is
    malformed (invalid JSON, invalid UTF-8, nested too deeply) or does not validate.
    """
    try:
        return _decoder(type_).decode(data)
    except msgspec.ValidationError as exc:
        raise DecodeError(f"invalid {type_.__name__}: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise DecodeError(f"malformed JSON for {type_.__name__}: {exc}") from exc
    except UnicodeDecodeError as exc:  # msgspec raises it for invalid UTF-8 inside a JSON string
        raise DecodeError(f"malformed JSON for {type_.__name__}: invalid UTF-8: {exc}") from exc
    except RecursionError as exc:  # msgspec's nesting limit (about 1,000 levels), even inside a skipped field
        raise DecodeError(f"malformed JSON for {type_.__name__}: nested too deeply ({exc})") from exc


def to_builtins(msg: Any) -> Any:
    """A message as plain dicts/lists (for reports and the CLI); fields at their default are left out, as on
    the wire."""
    return msgspec.to_builtins(msg)


def to_builtins_full(msg: Any) -> Any:
    """A message as plain dicts/lists with every field of every struct in it, those at their default too (the
    wire encoding and :func:`to_builtins` leave them out: a ``BEBudgetState`` in ``fallback`` has no ``phase``
    there), keys in field order under their encoded names; for people reading messages (``colo sub``).
    Decoding the result gives the message back."""
    if isinstance(msg, msgspec.Struct):
        return {name: to_builtins_full(getattr(msg, field))
                for field, name in zip(msg.__struct_fields__, msg.__struct_encode_fields__)}
    if isinstance(msg, dict):
        return {k: to_builtins_full(v) for k, v in msg.items()}
    if isinstance(msg, (list, tuple, set, frozenset)):
        return [to_builtins_full(v) for v in msg]
    return msgspec.to_builtins(msg)
