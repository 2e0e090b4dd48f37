"""Snapshot items: recorded from the old version before it stops, asked again of the new."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.upgrade.actions import Version, query_file_lines, render, take_snapshot
from soak.upgrade.config import CorpusSnapshot, SnapshotItem
from soak.upgrade.corpus import ask_corpus
from soak.upgrade.template import Values


@dataclass
class Snapshot:
    items: dict[str, SnapshotItem]
    records: dict[str, Any] = field(default_factory=dict)  # item name -> record
    base_dir: Path = field(default_factory=Path.cwd)  # where relative query files are

    @classmethod
    def of(cls, items: list[SnapshotItem], base_dir: Path | None = None) -> Snapshot:
        return cls({item.name: item for item in items}, base_dir=base_dir or Path.cwd())

    def take(self, values: Values, version: Version) -> list[str]:
        """Records every item; returns a line per item for the terminal."""
        lines = []
        for name in self.items:
            record = self.retake(name, values, version)
            self.records[name] = record
            lines.append(f"{name}: {describe(record)}")
        return lines

    def retake(self, name: str, values: Values, version: Version) -> Any:
        item = self.items[name]
        if isinstance(item, CorpusSnapshot):
            return self._corpus(item, values, version)
        return take_snapshot(item, values, version)

    def _corpus(self, item: CorpusSnapshot, values: Values, version: Version) -> list[Any]:
        path = Path(render(values, version, item.file))
        pairs = query_file_lines(path if path.is_absolute() else self.base_dir / path)
        count = item.count or len(pairs)
        host, port = version.dns_address(item.port)
        return ask_corpus(
            [pairs[i % len(pairs)] for i in range(count)],
            host,
            port,
            protocol=item.protocol,
            rate_qps=item.rate_qps,
            parallel=item.parallel,
            timeout_s=item.timeout_s,
        )


def describe(record: Any) -> str:
    if isinstance(record, list):  # a corpus
        errors = sum(1 for r in record if "error" in r)
        return f"{len(record)} answers" + (f" ({errors} without a reply)" if errors else "")
    if "status" in record:
        return (
            f"status {record['status']}" if record["status"] else f"no answer ({record['error']})"
        )
    if record.get("rcode"):
        return f"{record['rcode']}, {len(record['answers'])} answers"
    return f"no reply ({record.get('error')})"
