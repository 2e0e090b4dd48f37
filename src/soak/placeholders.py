"""The one `{name}` / `{port.NAME}` renderer: placeholders in argv, commands, files, plans.

A running target's values: `{data_dir}`, `{run_dir}`, `{host}`, `{port.NAME}`.
A helper service's: `{service.SERVICE.host}`, `{service.SERVICE.port.NAME}`.
A port name may hold letters, digits, `_`, `-` and `.`; a service name the same
but `.`. Any other braces are left alone, so JSON, YAML and shell snippets survive
(`{{name}}` values of an upgrade plan are a syntax of their own, upgrade/template.py).

Three users, one syntax: a target fills its own placeholders and an unknown port
is an InputError (`render`); a report or an upgrade fills what it knows and
leaves the rest as written (`render_known`, `fill`); a run fills its helper
services' placeholders first and leaves the target's own (`fill_services`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from soak.errors import InputError

PLACEHOLDER_RE = re.compile(
    r"\{(?:service\.(?P<service>[A-Za-z0-9_-]+)\.)?"
    r"(?P<key>data_dir|run_dir|host|port\.[A-Za-z0-9_.-]+)\}"
)

# (service or None, key) -> the text to put in, or None to leave the placeholder as written
Lookup = Callable[[str | None, str], str | None]


def substitute(text: str, lookup: Lookup) -> str:
    """`text` with every placeholder that `lookup` gives a value for replaced."""

    def value(m: re.Match[str]) -> str:
        found = lookup(m.group("service"), m.group("key"))
        return m.group(0) if found is None else found

    return PLACEHOLDER_RE.sub(value, text)


def services_named(text: str) -> set[str]:
    """The helper services whose placeholders `text` holds."""
    return {m.group("service") for m in PLACEHOLDER_RE.finditer(text) if m.group("service")}


# ---------------------------------------------------------------- a target's own values


@dataclass(frozen=True)
class Placeholders:
    run_dir: str
    host: str
    ports: dict[str, int] = field(default_factory=dict)
    data_dir: str | None = None  # None: not known (yet), {data_dir} is an error

    def value(self, key: str, where: str) -> str:
        if key.startswith("port."):
            name = key.removeprefix("port.")
            if name not in self.ports:
                known = ", ".join(sorted(self.ports)) or "none"
                raise InputError(f"{where}: unknown port {{port.{name}}} (named ports: {known})")
            return str(self.ports[name])
        if key == "data_dir":
            if self.data_dir is None:
                raise InputError(f"{where}: {{data_dir}} cannot be used here")
            return self.data_dir
        return self.run_dir if key == "run_dir" else self.host


def render(text: str, values: Placeholders, where: str = "target") -> str:
    """`text` with every target placeholder filled; an unknown port name is an InputError.
    Service placeholders are left as written."""
    return substitute(text, lambda service, key: None if service else values.value(key, where))


def render_known(text: str, values: Placeholders) -> str:
    """`text` with the placeholders `values` can fill; the others left as written."""

    def lookup(service: str | None, key: str) -> str | None:
        if service is not None:
            return None
        try:
            return values.value(key, "target")
        except InputError:
            return None

    return substitute(text, lookup)


def render_all(items: list[str], values: Placeholders, where: str) -> list[str]:
    return [render(item, values, where) for item in items]


def render_map(items: dict[str, str], values: Placeholders, where: str) -> dict[str, str]:
    return {key: render(value, values, f"{where}.{key}") for key, value in items.items()}


def fill(text: str, values: Mapping[str, str]) -> str:
    """Target placeholders from a `{"data_dir": ..., "port.dns": ...}` map; unknown ones
    (and service placeholders) stay as written."""
    return substitute(text, lambda service, key: None if service else values.get(key))


# ---------------------------------------------------------------- helper services' values


class ServiceAddress(Protocol):
    """Where a started helper service answers (a target's Running)."""

    @property
    def host(self) -> str: ...

    @property
    def ports(self) -> Mapping[str, int]: ...


def fill_services(text: str, services: Mapping[str, ServiceAddress], where: str) -> str:
    """`{service.NAME.host}` and `{service.NAME.port.P}` filled; the target's own placeholders
    are left for the target. An unknown service or port is an InputError; `data_dir` and
    `run_dir` of a service are not known and stay as written."""

    def lookup(service: str | None, key: str) -> str | None:
        if service is None or key in ("data_dir", "run_dir"):
            return None
        running = services.get(service)
        if running is None:
            known = ", ".join(sorted(services)) or "none"
            raise InputError(f"{where}: unknown service {service!r} (services: {known})")
        if key == "host":
            return running.host
        port = key.removeprefix("port.")
        if port not in running.ports:
            raise InputError(f"{where}: service {service!r} has no port {port!r}")
        return str(running.ports[port])

    return substitute(text, lookup)
