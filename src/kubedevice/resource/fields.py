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

    def error(self, path: str, what: str) -> DocumentError:
        return DocumentError(f"{self.where}{path}: {what}" if path else f"{self.where}{what}")

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
        return value

    def dns_label(self, value: Any, path: str) -> str:
        name = self.string(value, path, required=True)
        if not is_dns_label(name):
            raise self.error(
                path, f"{name!r} is not a DNS label (lower-case letters, digits and '-', at most 63)"
            )
        return name

    def dns_subdomain(self, value: Any, path: str) -> str:
        name = self.string(value, path, required=True)
        if not is_dns_subdomain(name):
            raise self.error(
                path,
                f"{name!r} is not a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)",
            )
        return name

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, item in self.mapping(value, path).items():
            if not isinstance(key, str) or not isinstance(item, str):
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


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}.get(
        type(value), f"a {type(value).__name__}"
    )
