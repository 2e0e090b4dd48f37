"""The embedded store: points in one SQLite file, read by reports, `soak status` and Grafana tests.

One row per (series, field, time): a series is (soak, measurement, tag set),
so `series()` for one field is an index range scan. Writing the same point
twice replaces it (primary key), so a replay after an uncertain failure never
shows a point twice. WAL mode lets readers in other processes read while the
service writes.

`window_minima()` is what a periodic leak pass reads: the store keeps each
asked series' window minima and reads only the samples written since the last
call; a write at or before a kept series' last read time drops what was kept.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from soak.clock import NS_PER_S
from soak.errors import SinkError
from soak.names import AGENT_TAG, is_agent_part
from soak.points import FieldValue, Point
from soak.windows import WindowMinima, Windows

_SCHEMA = """
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    soak TEXT NOT NULL,
    measurement TEXT NOT NULL,
    tags TEXT NOT NULL,
    UNIQUE (soak, measurement, tags)
);
CREATE TABLE IF NOT EXISTS samples (
    series_id INTEGER NOT NULL REFERENCES series(id),
    field TEXT NOT NULL,
    time_ns INTEGER NOT NULL,
    num REAL,
    txt TEXT,
    PRIMARY KEY (series_id, field, time_ns)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS samples_time ON samples (time_ns, series_id);
"""

Value = float | str

_PAGE_ROWS = 10_000
_KEPT_WINDOWED_SERIES = 256  # a few runs' leak resources; the least recently read goes first


# The first series of (soak, measurement) that has a field at all (window_minima's).
def _sans_version(tags: dict[str, str]) -> str:
    """A tag set as one series whatever its `version` (a soak's swap changes it)."""
    return json.dumps({k: v for k, v in tags.items() if k != "version"}, sort_keys=True)


_FIRST_SERIES_WITH_FIELD = (
    "SELECT s.id FROM series s WHERE s.soak = ? AND s.measurement = ? AND EXISTS"
    " (SELECT 1 FROM samples v WHERE v.series_id = s.id AND v.field = ?)"
    " ORDER BY s.id LIMIT 1"
)
# The newest value of (soak, measurement, field) over all its tag sets (latest's).
_NEWEST_VALUE = (
    "SELECT v.num, v.txt FROM samples v JOIN series s ON s.id = v.series_id"
    " WHERE s.soak = ? AND s.measurement = ? AND v.field = ?"
    " ORDER BY v.time_ns DESC LIMIT 1"
)

_SERIES_SAMPLES = "SELECT COUNT(*) FROM samples WHERE series_id = ?"


def _tags_key(tags: dict[str, str]) -> str:
    return json.dumps(tags, sort_keys=True, separators=(",", ":"))


def _split_value(value: FieldValue) -> tuple[float | None, str | None]:
    if isinstance(value, str):
        return None, value
    return float(value), None


class SqliteStore:
    """A Sink and the reader of what it stored."""

    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=10.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise SinkError(f"cannot open the point store {self.path}: {exc}") from exc
        self._series_ids: dict[tuple[str, str, str], int] = {}
        # (series id, field, since_ns, window_s) -> the minima so far, the last time read
        self._windows: dict[tuple[tuple[int, ...], str, int, float], tuple[WindowMinima, int]] = {}

    # ---------------------------------------------------------------- Sink

    def write(self, points: Sequence[Point]) -> None:
        with self._lock:
            try:
                rows = [row for p in points for row in self._rows(p)]
                if self._windows:
                    self._forget_windows_before(rows)
                self._db.executemany(
                    "INSERT OR REPLACE INTO samples (series_id, field, time_ns, num, txt)"
                    " VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                self._series_ids.clear()  # ids created in the rolled-back transaction are gone
                raise SinkError(f"sqlite {self.path}: {exc}") from exc

    def flush(self) -> None:
        """Every write commits; nothing is buffered."""

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rows(self, p: Point) -> Iterator[tuple[int, str, int, float | None, str | None]]:
        series_id = self._series_id(p.tags.get("soak", ""), p.measurement, p.tags)
        for name, value in p.fields.items():
            num, txt = _split_value(value)
            if num is not None and not math.isfinite(num):
                continue  # NaN/inf carry no value; the sampler records why it had none
            yield series_id, name, p.time_ns, num, txt

    def _forget_windows_before(self, rows: Sequence[tuple[int, str, int, object, object]]) -> None:
        """Drop kept window minima that a row at or before their last read time would change."""
        newest: dict[tuple[int, str], int] = {}
        for series_id, name, time_ns, _num, _txt in rows:
            key = (series_id, name)
            newest[key] = min(time_ns, newest.get(key, time_ns))
        for kept, (_windows, read_ns) in list(self._windows.items()):
            found = [newest[(i, kept[1])] for i in kept[0] if (i, kept[1]) in newest]
            if found and min(found) <= read_ns:
                del self._windows[kept]

    def _series_id(self, soak: str, measurement: str, tags: dict[str, str]) -> int:
        key = (soak, measurement, _tags_key(tags))
        cached = self._series_ids.get(key)
        if cached is not None:
            return cached
        self._db.execute(
            "INSERT OR IGNORE INTO series (soak, measurement, tags) VALUES (?, ?, ?)", key
        )
        row = self._db.execute(
            "SELECT id FROM series WHERE soak = ? AND measurement = ? AND tags = ?", key
        ).fetchone()
        self._series_ids[key] = int(row[0])
        return int(row[0])

    # ---------------------------------------------------------------- readers

    def series(
        self, soak: str, measurement: str, field: str, tags: dict[str, str] | None = None
    ) -> list[tuple[dict[str, str], list[tuple[int, Value]]]]:
        """One field over time, per distinct tag set (those containing `tags`), time-ordered;
        tag sets that differ only in `version` are one series (a soak's swap changes the
        version mid-run), under the first one's tags. A load agent's part
        (soak.names.AGENT_TAG) only where `tags` names the tag."""
        agents = bool(tags) and AGENT_TAG in (tags or {})
        result: dict[str, tuple[dict[str, str], list[tuple[int, Value]]]] = {}
        with self._lock:
            found = self._db.execute(
                "SELECT id, tags FROM series WHERE soak = ? AND measurement = ? ORDER BY id",
                (soak, measurement),
            ).fetchall()
            for series_id, tags_json in found:
                series_tags: dict[str, str] = json.loads(tags_json)
                if tags and any(series_tags.get(k) != v for k, v in tags.items()):
                    continue
                if is_agent_part(series_tags) and not agents:
                    continue
                rows = self._db.execute(
                    "SELECT time_ns, num, txt FROM samples WHERE series_id = ? AND field = ?"
                    " ORDER BY time_ns",
                    (series_id, field),
                ).fetchall()
                values = [(t, num if txt is None else txt) for t, num, txt in rows]
                if values:
                    result.setdefault(_sans_version(series_tags), (series_tags, []))[1].extend(
                        values
                    )
        return [(t, sorted(v, key=lambda tv: tv[0])) for t, v in result.values()]

    def points(
        self,
        soak: str,
        measurement: str | None = None,
        since_ns: int | None = None,
        *,
        agents: bool = False,
    ) -> Iterator[Point]:
        """A run's points (of one measurement, from `since_ns` on, if given), time-ordered;
        with `agents`, only the load agents' parts (soak.names.AGENT_TAG), else none of them.

        Read in pages (keyset pagination), so a long run is never all in memory and
        the store's lock is not held while the caller works on a page.
        """
        where = "s.soak = ?"
        args: list[object] = [soak]
        if measurement is not None:
            where += " AND s.measurement = ?"
            args.append(measurement)
        if since_ns is not None:
            where += " AND v.time_ns >= ?"
            args.append(since_ns)
        sql = (
            "SELECT v.time_ns, s.id, v.field, s.measurement, s.tags, v.num, v.txt"
            " FROM samples v JOIN series s ON s.id = v.series_id WHERE " + where
        )
        for point in self._pages(sql, args):
            if is_agent_part(point.tags) == agents:
                yield point

    def _pages(self, sql: str, args: list[object]) -> Iterator[Point]:
        order = " ORDER BY v.time_ns, s.id, v.field LIMIT ?"
        after = " AND (v.time_ns, s.id, v.field) > (?, ?, ?)"
        current: tuple[int, int] | None = None
        fields: dict[str, FieldValue] = {}
        meta: tuple[str, str] = ("", "")
        last: tuple[int, int, str] | None = None
        while True:
            with self._lock:
                if last is None:
                    rows = self._db.execute(sql + order, [*args, _PAGE_ROWS]).fetchall()
                else:
                    page_args = [*args, *last, _PAGE_ROWS]
                    rows = self._db.execute(sql + after + order, page_args).fetchall()
            for time_ns, series_id, name, meas, tags_json, num, txt in rows:
                if current != (series_id, time_ns):
                    if current is not None:
                        yield Point(meta[0], fields, current[1], json.loads(meta[1]))
                    current, fields, meta = (series_id, time_ns), {}, (meas, tags_json)
                fields[name] = num if txt is None else txt
            if len(rows) < _PAGE_ROWS:
                break
            last = (rows[-1][0], rows[-1][1], rows[-1][2])
        if current is not None:
            yield Point(meta[0], fields, current[1], json.loads(meta[1]))

    def window_minima(
        self, soak: str, measurement: str, field: str, since_ns: int, window_s: float
    ) -> Windows | None:
        """(window midpoint s, minimum) of one numeric field from `since_ns` on.

        The series is the first tag set (in the order `series()` gives) that has
        the field at all; None when none has. Windows as soak.windows defines
        them; only the samples written since the last call are read.
        """
        with self._lock:
            row = self._db.execute(_FIRST_SERIES_WITH_FIELD, (soak, measurement, field)).fetchone()
            if row is None:
                return None
            ids = self._versions_of(int(row[0]))  # a new version's series: read anew
            key = (ids, field, since_ns, window_s)
            kept = self._windows.pop(key, None)
            windows, read_ns = kept or (WindowMinima(window_s), since_ns - 1)
            rows = self._db.execute(
                f"SELECT time_ns, num FROM samples WHERE series_id IN ({','.join('?' * len(ids))})"
                " AND field = ? AND time_ns > ? AND num IS NOT NULL ORDER BY time_ns",
                (*ids, field, read_ns),
            ).fetchall()
            windows.add((t / NS_PER_S, v) for t, v in rows)
            self._windows[key] = (windows, rows[-1][0] if rows else read_ns)  # the newest last
            while len(self._windows) > _KEPT_WINDOWED_SERIES:
                del self._windows[next(iter(self._windows))]
            return windows.complete()

    def _versions_of(self, series_id: int) -> tuple[int, ...]:
        """The series of the same run and tags as `series_id` but for `version`, in order."""
        soak, measurement, tags = self._db.execute(
            "SELECT soak, measurement, tags FROM series WHERE id = ?", (series_id,)
        ).fetchone()
        same = _sans_version(json.loads(tags))
        found = self._db.execute(
            "SELECT id, tags FROM series WHERE soak = ? AND measurement = ? ORDER BY id",
            (soak, measurement),
        ).fetchall()
        return tuple(i for i, t in found if _sans_version(json.loads(t)) == same)

    def latest(self, soak: str, measurement: str, field: str) -> Value | None:
        """The newest value of a field in a run, over all its tag sets."""
        with self._lock:
            row = self._db.execute(_NEWEST_VALUE, (soak, measurement, field)).fetchone()
        if row is None:
            return None
        num, txt = row
        return num if txt is None else txt

    def last_sample_ns(self) -> dict[str, int]:
        """Each run's newest sample time (index seeks per series and field, no table scan)."""
        newest: dict[str, int] = {}
        with self._lock:
            for series_id, soak in self._db.execute("SELECT id, soak FROM series").fetchall():
                for name in self._fields(series_id):
                    row = self._db.execute(
                        "SELECT time_ns FROM samples WHERE series_id = ? AND field = ?"
                        " ORDER BY time_ns DESC LIMIT 1",
                        (series_id, name),
                    ).fetchone()
                    newest[soak] = max(newest.get(soak, row[0]), row[0])
        return newest

    def delete_run(self, soak: str) -> int:
        """Remove every point of a run; the number of samples removed.

        One transaction per series and field, so a service writing into the same
        file waits for one of them at most. The file keeps its size: the freed
        pages are reused by later points (see `free_bytes`).
        """
        removed = 0
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT id FROM series WHERE soak = ?", (soak,))]
        for series_id in ids:
            with self._lock:
                for name in self._fields(series_id):
                    cur = self._db.execute(
                        "DELETE FROM samples WHERE series_id = ? AND field = ?", (series_id, name)
                    )
                    removed += cur.rowcount
                    self._db.commit()
                self._db.execute("DELETE FROM series WHERE id = ?", (series_id,))
                self._db.commit()
                for key in [k for k, v in self._series_ids.items() if v == series_id]:
                    del self._series_ids[key]
                for kept in [k for k in self._windows if k[0] == series_id]:
                    del self._windows[kept]
        return removed

    def sample_counts(self) -> dict[str, int]:
        """Each run's number of samples (one count over the samples table)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT s.soak, COUNT(*) FROM samples v JOIN series s ON s.id = v.series_id"
                " GROUP BY s.soak"
            ).fetchall()
        return {soak: int(count) for soak, count in rows}

    def run_bytes(self, soak: str) -> tuple[int, int]:
        """(about how many bytes of the file a run's points take, its samples): the run's
        share of the samples times the bytes the file's data pages hold, indexes included
        (rows are about the same size whichever run wrote them). The run's samples are
        counted by its series' key ranges; all samples by the smallest index."""
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT id FROM series WHERE soak = ?", (soak,))]
            mine = sum(int(self._db.execute(_SERIES_SAMPLES, (i,)).fetchone()[0]) for i in ids)
            total = int(self._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
        if not mine:
            return 0, 0
        return round(self.used_bytes() * mine / total), mine

    def used_bytes(self) -> int:
        """Bytes of the file's pages that hold data (its size less the free pages)."""
        with self._lock:
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
            size = self._db.execute("PRAGMA page_size").fetchone()[0]
        return (int(pages) - int(free)) * int(size)

    def free_bytes(self) -> int:
        """Bytes of free pages inside the file (left by deletions, reused by writes)."""
        with self._lock:
            pages = self._db.execute("PRAGMA freelist_count").fetchone()[0]
            size = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)

    def _fields(self, series_id: int) -> list[str]:
        """The fields a series has, by index seeks (a skip scan of the primary key)."""
        sql = "SELECT field FROM samples WHERE series_id = ? ORDER BY field LIMIT 1"
        row = self._db.execute(sql, (series_id,)).fetchone()
        names: list[str] = []
        while row is not None:
            names.append(row[0])
            row = self._db.execute(
                "SELECT field FROM samples WHERE series_id = ? AND field > ?"
                " ORDER BY field LIMIT 1",
                (series_id, row[0]),
            ).fetchone()
        return names

    def soaks(self) -> list[str]:
        """Run ids that have points, in the order they first wrote."""
        with self._lock:
            rows = self._db.execute("SELECT soak FROM series GROUP BY soak ORDER BY min(id)")
            return [r[0] for r in rows.fetchall()]
