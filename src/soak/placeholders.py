"""The one `{name}` / `{port.NAME}` renderer: placeholders in argv, commands, files, plans.

A running target's values: `{data_dir}`, `{run_dir}`, `{host}`, `{port.NAME}`.
A helper service's: `{service.SERVICE.host}`, `{service.SERVICE.port.NAME}`.
A port name may hold letters, digits, `_`, `-` and `.`; a service name the same
but `.`. Braces around anything that is not a name (JSON, Lua tables, `${VAR}`,
`{a,b}`, a Prometheus `{label="v"}`) are left alone, so such snippets survive; braces
around a name are a placeholder or a mistake: `problems` names each such mistake with
the placeholder it was probably meant to be (`{env:NAME}` -> `{env.NAME}`, `{rundir}`
-> `{run_dir}`), and the pre-flight refuses it. `{{NAME}}` writes `{NAME}` literally:
the escape is kept through every pass and undone once, where the text is used (`render`,
`reveal`). (`{{name}}` values of an upgrade plan are a syntax of their own, filled
before any of this: upgrade/template.py.)

Three users, one syntax: a target fills its own placeholders and an unknown port
is an InputError (`render`); a report or an upgrade fills what it knows and
leaves the rest as written (`render_known`, `fill`); a run fills its helper
services' placeholders first and leaves the target's own (`fill_services`).

Secrets are given by reference: `{env.NAME}` (a variable of the environment of the
soak process that runs the run: the service's, in service mode) and `{file:PATH}`
(a file's text without its final newline; a relative PATH is relative to the
scenario's directory). Only the moment of use reveals them (`render` for a target's
argv, env and files; `reveal` for headers and bodies sent to it); everything that is
kept or shown (the scenario in the state, reports, events, the API) holds the
reference as written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from soak.errors import InputError

# What a brace may hold and still be read as a (misspelt) placeholder: a name.
_NAME = r"[A-Za-z_][A-Za-z0-9_.:/-]*"
PLACEHOLDER_RE = re.compile(
    r"\{\{(?P<escaped>" + _NAME + r")\}\}"
    r"|\{(?:(?:service\.(?P<service>[A-Za-z0-9_-]+)\.)?"
    r"(?P<key>data_dir|run_dir|host|port\.[A-Za-z0-9_.-]+)"
    r"|env\.(?P<env>[A-Za-z_][A-Za-z0-9_]*)|file:(?P<file>[^{}\s]+))\}"
)
# A name in single braces (not `${NAME}`, not part of `{{NAME}}`): a placeholder or a typo.
_CANDIDATE_RE = re.compile(r"(?<![{$])\{(?P<body>" + _NAME + r")\}(?!\})")

# (service or None, key) -> the text to put in, or None to leave the placeholder as written
Lookup = Callable[[str | None, str], str | None]
# the secret's reference -> its value (or None to leave it as written)
SecretLookup = Callable[[re.Match[str]], str | None]


def _as_written(m: re.Match[str]) -> str | None:
    return None


def substitute(
    text: str, lookup: Lookup, secret: SecretLookup = _as_written, unescape: bool = False
) -> str:
    """`text` with every placeholder that `lookup` (a secret: `secret`) gives a value for
    replaced; by default secrets stay as written. `{{NAME}}` stays as written for a later
    pass, or (`unescape`: the last pass, where the text is used) becomes `{NAME}`."""

    def value(m: re.Match[str]) -> str:
        escaped = m.group("escaped")
        if escaped is not None:
            return f"{{{escaped}}}" if unescape else m.group(0)
        key = m.group("key")
        found = secret(m) if key is None else lookup(m.group("service"), key)
        return m.group(0) if found is None else found

    return PLACEHOLDER_RE.sub(value, text)


# ---------------------------------------------------------------- secrets, by reference


def _secret_value(
    m: re.Match[str],
    base_dir: Path | None,
    environ: Mapping[str, str],
    where: str,
    reader: str | None = None,
) -> str:
    """`reader`: the process that reads the secrets, named in the error where it is not
    the one the user typed in (`soak serve`: its environment, not the client's)."""
    name = m.group("env")
    if name is not None:
        if name not in environ:
            whose = f" in the environment of `{reader}`, which reads it" if reader else ""
            raise InputError(
                f"{where}: {{env.{name}}}: environment variable {name} is not set{whose}"
            )
        return environ[name]
    path = Path(m.group("file")).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        return path.read_text(encoding="utf-8").removesuffix("\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        ref, by = m.group(0), f" (read by `{reader}`)" if reader else ""
        raise InputError(f"{where}: {ref}: cannot read {path}{by}: {reason}") from None


def reveal(
    text: str,
    base_dir: Path | None = None,
    where: str = "scenario",
    environ: Mapping[str, str] | None = None,
    reader: str | None = None,
) -> str:
    """`text` with its secret references (`{env.NAME}`, `{file:PATH}`) replaced by their
    values; other placeholders stay. A variable not set or a file not readable is an
    InputError (naming `reader`, the process that reads them, if given). The result is
    for sending, never for keeping."""
    env = os.environ if environ is None else environ
    return substitute(
        text,
        lambda service, key: None,
        lambda m: _secret_value(m, base_dir, env, where, reader),
        unescape=True,
    )


def reveal_map(items: Mapping[str, str], base_dir: Path | None, where: str) -> dict[str, str]:
    return {key: reveal(value, base_dir, f"{where}.{key}") for key, value in items.items()}


def reveal_json(value: Any, base_dir: Path | None, where: str) -> Any:
    """Every string of a JSON-like value (a request body) revealed."""
    if isinstance(value, str):
        return reveal(value, base_dir, where)
    if isinstance(value, dict):
        return {k: reveal_json(v, base_dir, where) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal_json(v, base_dir, where) for v in value]
    return value


def secret_references(text: str) -> list[str]:
    """The secret references in `text`, as written."""
    return [m.group(0) for m in PLACEHOLDER_RE.finditer(text) if m.group("env") or m.group("file")]


def services_named(text: str) -> set[str]:
    """The helper services whose placeholders `text` holds."""
    return {m.group("service") for m in PLACEHOLDER_RE.finditer(text) if m.group("service")}


# Words that make a name a secret's (a header, a variable, a flag), as its last word:
# `X-API-Key`, `REFDNS_TOKEN`, `--db-password`; not `dnskey`, `key_id`, `key-file`.
_SECRET_WORDS = {"key", "apikey", "token", "password", "passwd", "secret", "authorization"}


def looks_secret(name: str) -> bool:
    """Whether `name` names a secret: its last word (split at `-`, `_`, `.` and case
    changes) is one of key, token, password, secret, authorization."""
    words = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)
    return bool(words) and words[-1].lower() in _SECRET_WORDS


def literal_secrets(value: Any, where: str = "") -> list[str]:
    """One line for each literal value (not a `{env.NAME}` or `{file:PATH}` reference)
    under a name that looks like a secret's, anywhere in a JSON-like `value`: a mapping's
    key, or an argv's `--name=value`. It would be kept in clear wherever the scenario is."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}".lstrip(".")
            if isinstance(item, str) and looks_secret(str(key)):
                found += _literal(path, str(key), item)
            else:
                found += literal_secrets(item, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            flag, sep, text = item.partition("=") if isinstance(item, str) else ("", "", "")
            if sep and flag.startswith("-") and looks_secret(flag):
                found += _literal(f"{where}.{i}", flag.lstrip("-"), text)
            else:
                found += literal_secrets(item, f"{where}.{i}")
    return found


def _literal(where: str, name: str, text: str) -> list[str]:
    if not text.strip() or secret_references(text):
        return []
    env = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper()
    scheme = text.strip().rpartition(" ")[0]  # `Bearer abc`: the scheme stays written
    ref = f"{scheme} {{env.{env}}}" if scheme else f"{{env.{env}}}"
    return [
        f"{where}: a literal value under a secret's name is kept in clear; give it by"
        f" reference: {ref!r} (or {{file:PATH}})"
    ]


# ---------------------------------------------------------------- what is not a placeholder

_WORDS = ("data_dir", "run_dir", "host")
_PREFIXES = {"env": "env.", "file": "file:", "port": "port.", "service": "service."}
_FORMS = "{data_dir}, {run_dir}, {host}, {port.NAME}, {env.NAME}, {file:PATH}, {service.NAME.host}"


def problems(text: str) -> list[str]:
    """One line for each name in single braces in `text` that is not a placeholder: what it
    probably meant (`{env:TOKEN}`: did you mean {env.TOKEN}?), or every form there is."""
    found = []
    for m in _CANDIDATE_RE.finditer(text):
        body = m.group("body")
        if PLACEHOLDER_RE.fullmatch(m.group(0)):
            continue
        guess = _meant(body)
        hint = f"did you mean {guess}?" if guess else f"the placeholders are {_FORMS}"
        found.append(f"{m.group(0)} is not a placeholder: {hint} ({{{{{body}}}}} writes it as is)")
    return found


def check_text(text: str, where: str) -> None:
    """InputError (one line) for the first name in braces that is not a placeholder."""
    found = problems(text)
    if found:
        raise InputError(f"{where}: {found[0]}")


def _squash(word: str) -> str:
    return re.sub(r"[^a-z0-9]", "", word.lower())


def _meant(body: str) -> str | None:
    """The placeholder `body` was probably meant to be, or None."""
    from difflib import get_close_matches

    words = get_close_matches(_squash(body), [_squash(w) for w in _WORDS], n=1, cutoff=0.75)
    if words:
        return "{" + next(w for w in _WORDS if _squash(w) == words[0]) + "}"
    head, sep, rest = _split(body)
    if not sep or not rest:
        return None
    prefixes = get_close_matches(head.lower(), list(_PREFIXES), n=1, cutoff=0.6)
    if not prefixes:
        return None
    guess = "{" + _PREFIXES[prefixes[0]] + rest + "}"
    return guess if PLACEHOLDER_RE.fullmatch(guess) else None


def _split(body: str) -> tuple[str, str, str]:
    """`env:NAME` -> ("env", ":", "NAME"): at the first `.` or `:`."""
    m = re.match(r"([^.:]*)([.:])(.*)", body)
    return (m.group(1), m.group(2), m.group(3)) if m else (body, "", "")


# ---------------------------------------------------------------- a target's own values


@dataclass(frozen=True)
class Placeholders:
    run_dir: str
    host: str
    ports: dict[str, int] = field(default_factory=dict)
    data_dir: str | None = None  # None: not known (yet), {data_dir} is an error
    base_dir: Path | None = None  # where a relative {file:PATH} is

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


def render(text: str, values: Placeholders, where: str = "target", secrets: bool = True) -> str:
    """`text` with every target placeholder and secret filled and `{{NAME}}` written as
    `{NAME}` (for the target to use: never kept); an unknown port name, an unset variable,
    an unreadable file are InputErrors.
    Service placeholders are left as written; `secrets=False`, secrets too (a pre-flight
    that checks only whether the rest can be filled)."""

    def secret(m: re.Match[str]) -> str | None:
        return _secret_value(m, values.base_dir, os.environ, where) if secrets else None

    return substitute(
        text,
        lambda service, key: None if service else values.value(key, where),
        secret,
        unescape=True,
    )


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
