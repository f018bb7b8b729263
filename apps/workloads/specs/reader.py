"""Typed reading of JSON-ish input that records every error under its field path instead of raising."""

from __future__ import annotations

import math

from apps.core.text import N_, Text

REQUIRED = object()


class Errors:
    """Field path -> messages, in the order found."""

    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}

    def add(self, path: str, message: Text) -> None:
        self.fields.setdefault(path, []).append(message)

    def has(self, *paths: str) -> bool:
        return any(
            p in self.fields or any(k.startswith(p + ".") or k.startswith(p + "[") for k in self.fields) for p in paths
        )


def join_path(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


class Reader:
    """Typed access to one JSON object; records an error (and returns None) instead of raising."""

    def __init__(
        self, data: object, prefix: str, errors: Errors, allowed: tuple[str, ...], hints: dict[str, str] | None = None
    ) -> None:
        self.prefix = prefix
        self.errors = errors
        self.ok = isinstance(data, dict)
        self.data: dict = data if isinstance(data, dict) else {}
        if not self.ok:
            errors.add(prefix or "spec", N_("must be a JSON object, not %(type)s", type=type_name(data)))
            return
        for key in self.data:
            if key not in allowed:
                where, listed = join_path(prefix, str(key)), ", ".join(allowed)
                if hints and key in hints:
                    message = N_(
                        "unknown field (did you mean %(hint)s?); allowed: %(allowed)s", hint=hints[key], allowed=listed
                    )
                else:
                    message = N_("unknown field; allowed: %(allowed)s", allowed=listed)
                errors.add(where, message)

    def path(self, key: str) -> str:
        return join_path(self.prefix, key)

    def get(self, key: str, default: object) -> tuple[object, bool]:
        """(value, present). Reports a missing required field."""
        if key in self.data:
            return self.data[key], True
        if default is REQUIRED and self.ok:
            self.errors.add(self.path(key), N_("this field is required"))
        return (None if default is REQUIRED else default), False

    def string(self, key: str, default: object = REQUIRED, *, nullable: bool = False) -> str | None:
        value, present = self.get(key, default)
        if not present or (value is None and nullable):
            return value  # type: ignore[return-value]
        if not isinstance(value, str):
            self.errors.add(self.path(key), N_("must be a string, not %(type)s", type=type_name(value)))
            return None
        return value

    def integer(self, key: str, default: object = REQUIRED, *, lo: int, hi: int, nullable: bool = False) -> int | None:
        value, present = self.get(key, default)
        if not present or (value is None and nullable):
            return value  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, int):
            self.errors.add(self.path(key), N_("must be an integer, not %(type)s", type=type_name(value)))
            return None
        if not lo <= value <= hi:
            self.errors.add(
                self.path(key), N_("must be between %(lo)s and %(hi)s, not %(value)s", lo=lo, hi=hi, value=value)
            )
            return None
        return value

    def number(self, key: str, default: object = REQUIRED) -> float | None:
        value, present = self.get(key, default)
        if not present:
            return value  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            self.errors.add(self.path(key), N_("must be a number, not %(type)s", type=type_name(value)))
            return None
        return float(value)

    def boolean(self, key: str, default: object = REQUIRED) -> bool | None:
        value, present = self.get(key, default)
        if present and not isinstance(value, bool):
            self.errors.add(self.path(key), N_("must be true or false, not %(type)s", type=type_name(value)))
            return None
        return value  # type: ignore[return-value]

    def strings(self, key: str, *, max_items: int, max_len: int) -> list[str] | None:
        value, present = self.get(key, [])
        if not present:
            return []
        if not isinstance(value, list):
            self.errors.add(self.path(key), N_("must be a list of strings, not %(type)s", type=type_name(value)))
            return None
        if len(value) > max_items:
            self.errors.add(self.path(key), N_("at most %(max)s items, not %(count)s", max=max_items, count=len(value)))
            return None
        out = []
        for i, item in enumerate(value):
            where = f"{self.path(key)}[{i}]"
            if not isinstance(item, str):
                self.errors.add(where, N_("must be a string, not %(type)s", type=type_name(item)))
            elif "\x00" in item:
                self.errors.add(where, N_("a NUL character cannot be passed in an argument"))
            elif not is_text(item):
                self.errors.add(where, N_("is not valid Unicode text (a lone surrogate)"))
            elif len(item) > max_len:
                self.errors.add(where, N_("at most %(max)s characters, not %(count)s", max=max_len, count=len(item)))
            else:
                out.append(item)
        return out if len(out) == len(value) else None

    def obj(self, key: str, allowed: tuple[str, ...], *, nullable: bool = True) -> Reader | None:
        """A nested object; None when absent (or null) so the caller uses its defaults."""
        value, present = self.get(key, None)
        if not present or (value is None and nullable):
            return None
        return Reader(value, self.path(key), self.errors, allowed)


def is_text(value: str) -> bool:
    """False for strings JSON can carry but UTF-8 cannot (lone surrogates such as "\\ud800")."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def type_name(value: object) -> str:
    """What JSON type `value` is, as words for a message ("an integer"); a Text, so messages translate it."""
    if value is None:
        return "null"
    words = {
        bool: N_("a boolean"),
        int: N_("an integer"),
        float: N_("a number"),
        str: N_("a string"),
        list: N_("a list"),
        dict: N_("an object"),
    }
    return words.get(type(value), type(value).__name__)
