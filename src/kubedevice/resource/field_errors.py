"""The API server's field errors (apimachinery's `field.Error`), worded as it words them, so that a refusal
the daemon answers in the API server's place reads the same: `status.devices[0].conditions[1].status:
Unsupported value: "Maybe": supported values: "False", "True", "Unknown"`.

Only what the daemon's validations use: Invalid, Required, Duplicate, NotSupported, Forbidden, TooLong and
TooMany, the field path written as `field.Path` writes it, the list joined as an Aggregate joins it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kubedevice.wording import go_quote

__all__ = ["FieldError", "Shown", "aggregate", "invalid_object_message", "path"]


def path(*parts: str | int) -> str:
    """`status.devices[0].conditions`: names joined by dots, indexes in brackets (field.Path.String)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True, slots=True)
class FieldError:
    """One refusal of one field. `reason` is the error's type as the API's Status causes name it
    (`FieldValueInvalid`...); `body` is what follows the path (ErrorBody)."""

    field: str
    reason: str
    body: str

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"

    def cause(self) -> dict[str, str]:
        """The error as one of a Status's `details.causes`."""
        return {"reason": self.reason, "message": str(self), "field": self.field}

    # --- the constructors of apimachinery's field package, value shown as ErrorBody shows it ---

    @classmethod
    def invalid(cls, field: str, value: object, detail: str) -> FieldError:
        return cls(field, "FieldValueInvalid", _with_detail(f"Invalid value: {_shown(value)}", detail))

    @classmethod
    def required(cls, field: str, detail: str = "") -> FieldError:
        return cls(field, "FieldValueRequired", _with_detail("Required value", detail))

    @classmethod
    def duplicate(cls, field: str, value: object) -> FieldError:
        return cls(field, "FieldValueDuplicate", f"Duplicate value: {_shown(value)}")

    @classmethod
    def not_supported(cls, field: str, value: object, supported: Sequence[str]) -> FieldError:
        detail = "supported values: " + ", ".join(go_quote(v) for v in supported)
        return cls(field, "FieldValueNotSupported", f"Unsupported value: {_shown(value)}: {detail}")

    @classmethod
    def forbidden(cls, field: str, detail: str) -> FieldError:
        return cls(field, "FieldValueForbidden", _with_detail("Forbidden", detail))

    @classmethod
    def too_long(cls, field: str, limit: int) -> FieldError:
        return cls(field, "FieldValueTooLong", f"Too long: may not be more than {limit} bytes")

    @classmethod
    def too_many(cls, field: str, count: int, limit: int) -> FieldError:
        return cls(field, "FieldValueTooMany", f"Too many: {count}: must have at most {limit} items")


class Shown(str):
    """A value ErrorBody prints bare (a fmt.Stringer: a device ID), not quoted as a string."""


def _shown(value: object) -> str:
    if isinstance(value, Shown):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _with_detail(head: str, detail: str) -> str:
    return f"{head}: {detail}" if detail else head


def aggregate(errors: Iterable[FieldError]) -> str:
    """The errors as one line, as an Aggregate prints them: one alone, several `[a, b]`; repeats once."""
    texts = list(dict.fromkeys(str(e) for e in errors))
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def invalid_object_message(kind: str, name: str, errors: Iterable[FieldError]) -> str:
    """The API server's 422 text: `ResourceClaim.resource.k8s.io "c1" is invalid: <errors>`."""
    return f"{kind} {go_quote(name)} is invalid: {aggregate(errors)}"
