"""Snapshot items: recorded from the old version before it stops, asked again of the new."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from soak.upgrade.actions import Version, take_snapshot
from soak.upgrade.config import SnapshotItem
from soak.upgrade.template import Values


@dataclass
class Snapshot:
    items: dict[str, SnapshotItem]
    records: dict[str, Any] = field(default_factory=dict)  # item name -> record

    @classmethod
    def of(cls, items: list[SnapshotItem]) -> Snapshot:
        return cls({item.name: item for item in items})

    def take(self, values: Values, version: Version) -> list[str]:
        """Records every item; returns a line per item for the terminal."""
        lines = []
        for name, item in self.items.items():
            record = take_snapshot(item, values, version)
            self.records[name] = record
            lines.append(f"{name}: {describe(record)}")
        return lines

    def retake(self, name: str, values: Values, version: Version) -> Any:
        return take_snapshot(self.items[name], values, version)


def describe(record: dict[str, Any]) -> str:
    if "status" in record:
        return (
            f"status {record['status']}" if record["status"] else f"no answer ({record['error']})"
        )
    if record.get("rcode"):
        return f"{record['rcode']}, {len(record['answers'])} answers"
    return f"no reply ({record.get('error')})"
