"""A small JSON path: enough to save an id and to assert on an API answer.

Grammar: `$` then any of `.key`, `['key']`, `[N]` (negative counts from the end),
`[*]` / `.*` (every element or value), `[?(@.key=='value')]` (elements whose key
equals a string, number, true, false or null). `select` returns every match, in
document order; a path that matches nothing gives [].
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN_RE = re.compile(
    r"""\.(?P<key>[A-Za-z_][\w\-]*)
      | \.\*(?P<dotstar>)
      | \[\s*\*\s*\](?P<star>)
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*(?P<q>['"])(?P<qkey>.*?)(?P=q)\s*\]
      | \[\s*\?\(\s*@\.(?P<fkey>[\w\-]+)\s*==\s*(?P<fval>'[^']*'|"[^"]*"|[^)\s]+)\s*\)\s*\]
    """,
    re.VERBOSE,
)

Step = tuple[str, Any]


def parse(path: str) -> list[Step]:
    """`$.rrsets[?(@.type=='A')].records[0].content` -> steps; ValueError if malformed."""
    text = path.strip()
    if not text.startswith("$"):
        raise ValueError(f"a JSON path starts with $: {path!r}")
    steps: list[Step] = []
    pos = 1
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read JSON path {path!r} at {text[pos:]!r}")
        if m.group("key") is not None:
            steps.append(("key", m.group("key")))
        elif m.group("qkey") is not None:
            steps.append(("key", m.group("qkey")))
        elif m.group("index") is not None:
            steps.append(("index", int(m.group("index"))))
        elif m.group("fkey") is not None:
            steps.append(("filter", (m.group("fkey"), _literal(m.group("fval")))))
        else:
            steps.append(("all", None))
        pos = m.end()
    return steps


def _literal(text: str) -> Any:
    if text[:1] in "'\"":
        return text[1:-1]
    return json.loads(text)  # numbers, true, false, null


def _apply(step: Step, node: Any) -> list[Any]:
    kind, arg = step
    if kind == "key":
        return [node[arg]] if isinstance(node, dict) and arg in node else []
    if kind == "index":
        if isinstance(node, list) and -len(node) <= arg < len(node):
            return [node[arg]]
        return []
    if kind == "all":
        if isinstance(node, list):
            return list(node)
        return list(node.values()) if isinstance(node, dict) else []
    key, value = arg
    items = node if isinstance(node, list) else []
    return [x for x in items if isinstance(x, dict) and x.get(key) == value]


def select(doc: Any, path: str) -> list[Any]:
    nodes = [doc]
    for step in parse(path):
        nodes = [out for node in nodes for out in _apply(step, node)]
    return nodes
