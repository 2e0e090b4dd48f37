"""Query parsing, encoding, random names and mix weighting (pure)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import dns.message
import dns.name
import pytest

from soak.errors import InputError
from soak.load.load_config import LoadConfig, QueryClass, RandomNames
from soak.load.queries import (
    Question,
    RandomSource,
    build_classes,
    encode_question,
    mix_schedule,
    parse_line,
    parse_lines,
    read_query_file,
)
from soak.load.wire import HEADER


def test_line_forms() -> None:
    assert parse_line("www.example.test AAAA", "x") == Question("www.example.test", 28)
    assert parse_line("  www.example.test  ", "x") == Question("www.example.test", 1)
    assert parse_line("example.test mx", "x") == Question("example.test", 15)
    assert parse_line("# a comment", "x") is None
    assert parse_line("   ", "x") is None


def test_unknown_type_names_the_line() -> None:
    with pytest.raises(InputError, match=r"q.txt line 2: unknown record type 'BOGUS'"):
        parse_lines(["www.example.test A", "www.example.test BOGUS"], "q.txt")


def test_malformed_line_names_the_line() -> None:
    with pytest.raises(InputError, match=r"line 3: malformed query line"):
        parse_lines(["# c", "a.test", "a.test A extra"], "q.txt")
    with pytest.raises(InputError, match=r"line 1: malformed name"):
        parse_lines(["a" * 70 + ".test A"], "q.txt")


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    with pytest.raises(InputError, match="no queries"):
        read_query_file(empty)
    with pytest.raises(InputError, match="cannot read query file"):
        read_query_file(tmp_path / "missing.txt")


def test_wire_matches_dnspython() -> None:
    wire = HEADER + encode_question(Question("www.example.test", 28))
    msg = dns.message.from_wire(wire)
    assert str(msg.question[0].name) == "www.example.test."
    assert msg.question[0].rdtype == 28
    assert msg.id == 0 and msg.flags & dns.flags.RD


def test_random_names_fresh_and_repeatable() -> None:
    spec = RandomNames(zone="miss.test", label_length=10)
    a = [RandomSource(spec, 7).next_question() for _ in range(1)]
    first = RandomSource(spec, 7)
    names = [first.next_question() for _ in range(1000)]
    assert len(set(names)) == 1000
    assert names[0] == a[0]
    again = RandomSource(spec, 7)
    assert [again.next_question() for _ in range(1000)] == names
    other = RandomSource(spec, 8)
    assert other.next_question() != names[0]
    msg = dns.message.from_wire(HEADER + names[0])
    labels = msg.question[0].name.labels
    assert len(labels[0]) == 10 and labels[1:] == (b"miss", b"test", b"")


@pytest.mark.parametrize("weights", [[1.0], [3, 1], [70, 20, 5, 5], [0.5, 0.25, 0.25]])
def test_mix_schedule_follows_weights(weights: list[float]) -> None:
    order = mix_schedule(weights, length=1000)
    counts = Counter(order)
    total = sum(weights)
    for i, w in enumerate(weights):
        assert abs(counts[i] - 1000 * w / total) <= 1


def test_mix_schedule_interleaves() -> None:
    order = mix_schedule([1, 1], length=10)
    assert order == [0, 1] * 5
    with pytest.raises(ValueError):
        mix_schedule([1, 0])


def test_build_classes(tmp_path: Path) -> None:
    qfile = tmp_path / "q.txt"
    qfile.write_text("a.test\nb.test AAAA\n")
    cfg = LoadConfig(
        mix=[
            QueryClass(name="files", file=Path("q.txt"), expect={"rcodes": ["noerror"]}),
            QueryClass(name="inline", queries=["c.test MX"], expect={"addresses": ["0.0.0.0"]}),
            QueryClass(name="miss", random=RandomNames(zone="x.test")),
        ]
    )
    classes = build_classes(cfg.mix, tmp_path, seed=1)
    assert [len(c.questions) for c in classes] == [2, 1, 0]
    assert classes[0].expect_rcodes == frozenset({0})
    assert classes[1].expect_addresses == frozenset({b"\0\0\0\0"})
    assert classes[2].random is not None


def test_build_classes_rejects_bad_input(tmp_path: Path) -> None:
    dup = [QueryClass(name="a", queries=["a.test"]), QueryClass(name="a", queries=["b.test"])]
    with pytest.raises(InputError, match="unique"):
        build_classes(dup, tmp_path, 1)
    bad_rcode = [QueryClass(name="a", queries=["a.test"], expect={"rcodes": ["NOPE"]})]
    with pytest.raises(InputError, match="unknown rcode"):
        build_classes(bad_rcode, tmp_path, 1)
    bad_type = [QueryClass(name="m", random=RandomNames(zone="x.test", type="BOGUS"))]
    with pytest.raises(InputError, match="unknown record type"):
        build_classes(bad_type, tmp_path, 1)


@pytest.mark.parametrize(
    "name",
    ["www.example.test", "WWW.Example.TEST.", ".", "a." * 60 + "test", "x" * 63 + ".test",
     "_srv._tcp.example.test", "a-b.c_d.test", r"we\.ird.test", r"\065bc.test"],
)  # fmt: skip
def test_fast_encoding_matches_dnspython(name: str) -> None:
    assert encode_question(Question(name, 1))[:-4] == dns.name.from_text(name).to_wire()


def test_bad_names_fall_back_to_dnspython_errors() -> None:
    for bad in ["x" * 64 + ".test", "a..b.test", ("a" * 60 + ".") * 5 + "test"]:
        with pytest.raises(InputError, match="malformed name"):
            parse_line(f"{bad} A", "q.txt line 1")
