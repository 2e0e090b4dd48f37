"""`{{name}}` values (vars, saved values, the environment) and the secrets they hold.

`{{name}}` looks up a value saved by a populate step, then the plan's `vars`,
then the environment; `{{env.NAME}}` is the environment only. Values whose
names the plan lists in `secrets:` (and only those: a saved `dnskey` or `key_id` is
DNS data, not a credential) are replaced by `***` in everything the run prints or
writes.

Single-brace placeholders of the running target (`{data_dir}`, `{run_dir}`,
`{host}`, `{port.NAME}`) are filled by soak.placeholders.fill; any other braces
(JSON in a shell command, say) are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from soak.errors import InputError

TEMPLATE_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*\}\}")
MASK = "***"


def referenced_names(obj: Any) -> set[str]:
    """Every `{{name}}` in strings anywhere inside `obj` (dicts, lists, strings)."""
    names: set[str] = set()
    if isinstance(obj, str):
        names.update(TEMPLATE_RE.findall(obj))
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            names |= referenced_names(key) | referenced_names(value)
    elif isinstance(obj, list | tuple):
        for value in obj:
            names |= referenced_names(value)
    return names


class Values:
    """The run's `{{name}}` values and the secret ones among them."""

    def __init__(
        self,
        vars: Mapping[str, str],
        env: Mapping[str, str],
        secret_names: list[str] | tuple[str, ...] = (),
    ) -> None:
        self._vars = dict(vars)
        self._env = dict(env)
        self._saved: dict[str, str] = {}
        self._secret_names = set(secret_names)
        self._secret_values: set[str] = set()

    def is_secret(self, name: str) -> bool:
        return name in self._secret_names or name.removeprefix("env.") in self._secret_names

    def save(self, name: str, value: Any) -> None:
        text = value if isinstance(value, str) else str(value)
        self._saved[name] = text
        if self.is_secret(name):
            self._remember_secret(text)

    def _remember_secret(self, value: str) -> None:
        if len(value) >= 3:  # masking "1" or "" would garble every message
            self._secret_values.add(value)

    def lookup(self, name: str) -> str:
        if name.startswith("env."):
            value = self._env.get(name[4:])
        else:
            value = self._saved.get(name)
            if value is None and name in self._vars:
                value = self.render(self._vars[name])
            if value is None:
                value = self._env.get(name)
        if value is None:
            raise InputError(f"{{{{{name}}}}} has no value (not saved, not a var, not in env)")
        if self.is_secret(name):
            self._remember_secret(value)
        return value

    def render(self, obj: Any, quote: Callable[[str], str] | None = None) -> Any:
        """`obj` with every `{{name}}` replaced, recursively through dicts and lists;
        each value passed through `quote` first (re.escape: a value in a regex)."""
        if isinstance(obj, str):
            if quote is None:
                return TEMPLATE_RE.sub(lambda m: self.lookup(m.group(1)), obj)
            return TEMPLATE_RE.sub(lambda m: quote(self.lookup(m.group(1))), obj)
        if isinstance(obj, dict):
            return {self.render(k, quote): self.render(v, quote) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.render(v, quote) for v in obj]
        return obj

    def redact(self, text: str) -> str:
        """`text` with every secret value seen so far replaced by ***."""
        for secret in sorted(self._secret_values, key=len, reverse=True):
            text = text.replace(secret, MASK)
        return text

    def redact_obj(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {k: self.redact_obj(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(v) for v in obj]
        return obj
