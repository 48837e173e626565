"""Reading a decoded document's fields with their paths, so every refusal names the field at fault."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubedevice.resource.model import OwnerReference
from kubedevice.resource.names import is_dns_label, is_dns_subdomain

# A C identifier of at most 32 characters, optionally `<DNS subdomain>/`-qualified: the API's attribute
# and capacity names.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")


class DocumentError(ValueError):
    """Why a document cannot be used; str() is one line naming the document and the field.

    `anonymous`: the text cannot name the document (no kind or name yet), so a file of several documents
    prefixes its position.
    """

    def __init__(self, message: str, *, anonymous: bool = False) -> None:
        super().__init__(message)
        self.anonymous = anonymous


def check_text(doc: Any) -> None:
    """Refuse a decoded document holding a string that is not valid UTF-8 (a lone surrogate, which the json
    module makes of a `\\ud800` escape), in a key or a value: nothing later can fail to encode it (gRPC,
    the checkpoint, a status answer). The API server refuses the same bytes when it decodes the body.

    One walk without recursion (a deep document costs no stack); the path is built only for the culprit.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if not _is_utf8(value):
                _refuse_text(value, path)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and not _is_utf8(key):
                    _refuse_text(key, path)
                stack.append((item, (*path, str(key))))
        elif isinstance(value, list):
            stack.extend((item, (*path, i)) for i, item in enumerate(value))


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refuse_text(text: str, path: tuple[str | int, ...]) -> None:
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    raise DocumentError(
        f"{where or 'document'}: {shown(text)} is not valid UTF-8 (a lone surrogate)", anonymous=True
    )


def is_qualified_attribute(name: str, *, domain_required: bool) -> bool:
    """An attribute or capacity name: `<domain>/<identifier>`, or a bare identifier when allowed."""
    domain, _, ident = name.rpartition("/")
    if not domain and (domain_required or "/" in name):
        return False
    if domain and not is_dns_subdomain(domain):
        return False
    return _IDENTIFIER.fullmatch(ident) is not None


class Fields:
    """Typed access to one document's values; `where` prefixes every error (e.g. `ResourceClaim ns/c: `)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def error(self, path: str, what: str, *, anonymous: bool = False) -> DocumentError:
        text = f"{self.where}{path}: {what}" if path else f"{self.where}{what}"
        return DocumentError(text, anonymous=anonymous)

    def not_a_string(self, value: Any, path: str) -> DocumentError:
        """A name that is not a string: the document has no name yet, so its position goes first."""
        return self.error(path, f"must be a string, not {_type(value)}", anonymous=True)

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(path, f"must be a mapping, not {_type(value)}")
        return value

    def items(self, value: Any, path: str, *, at_most: int | None = None) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, f"must be a list, not {_type(value)}")
        if at_most is not None and len(value) > at_most:
            raise self.error(path, f"must have at most {at_most} items, has {len(value)}")
        return value

    def string(self, value: Any, path: str, *, required: bool = False) -> str:
        if value is None or value == "":
            if required:
                raise self.error(path, "is required")
            return ""
        if not isinstance(value, str):
            raise self.error(path, f"must be a string, not {_type(value)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false, not {_type(value)}")
        return value

    def integer(self, value: Any, path: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"must be an integer, not {_type(value)}")
        if not -(2**63) <= value < 2**63:  # the API's integers are int64: its decoder refuses the rest
            raise self.error(path, f"{value} does not fit in an int64")
        return value

    def dns_label(self, value: Any, path: str) -> str:
        name = self.string(value, path, required=True)
        if not is_dns_label(name):
            raise self.error(
                path, f"{shown(name)} is not a DNS label (lower-case letters, digits and '-', at most 63)"
            )
        return name

    def dns_subdomain(self, value: Any, path: str) -> str:
        name = self.string(value, path, required=True)
        if not is_dns_subdomain(name):
            rule = "lower-case letters, digits, '-' and '.', at most 253"
            raise self.error(path, f"{shown(name)} is not a DNS subdomain ({rule})")
        return name

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, item in self.mapping(value, path).items():
            if not isinstance(key, str):
                raise self.error(path, f"key {key!r} is not a string")
            if not isinstance(item, str):
                raise self.error(f"{path}.{key}", f"must be a string, not {_type(item)}")
            out[key] = item
        return out

    def owner_references(self, value: Any, path: str) -> tuple[OwnerReference, ...]:
        out: list[OwnerReference] = []
        for i, raw in enumerate(self.items(value, path)):
            at = f"{path}[{i}]"
            ref = self.mapping(raw, at)
            out.append(
                OwnerReference(
                    api_version=self.string(ref.get("apiVersion"), f"{at}.apiVersion", required=True),
                    kind=self.string(ref.get("kind"), f"{at}.kind", required=True),
                    name=self.string(ref.get("name"), f"{at}.name", required=True),
                    uid=self.string(ref.get("uid"), f"{at}.uid", required=True),
                    controller=self.boolean(ref.get("controller"), f"{at}.controller"),
                )
            )
        return tuple(out)


#: How much of a refused value an error quotes: a 1 MiB name must not make a 1 MiB line.
_SHOWN = 80


def shown(value: str) -> str:
    """A value quoted in an error: repr (control characters escaped), cut after _SHOWN characters."""
    if len(value) <= _SHOWN:
        return repr(value)
    return f"{value[:_SHOWN]!r}… ({len(value)} characters)"


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}.get(
        type(value), f"a {type(value).__name__}"
    )
