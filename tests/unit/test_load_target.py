"""How the compiled stream loops resolve a server given by name (target.py): as the
Python loop's connect does (IPv4 for a name, the first address), again at most once a
second, and a changed address handed to the engine."""

from __future__ import annotations

import threading

from soak.load.target import RESOLVE_EVERY_NS, Target, resolve
from soak.load.worker import monotonic_ns


class Engine:
    """What the driver calls on a compiled engine, recorded."""

    def __init__(self) -> None:
        self.addresses: list[tuple[str | None, int]] = []

    def set_address(self, host: str | None, port: int) -> None:
        self.addresses.append((host, port))


def test_a_name_resolves_as_the_python_loop_connects_to_it() -> None:
    assert resolve("localhost", 53) == "127.0.0.1"  # IPv4: StreamFlow's socket for a name
    assert resolve("no-such-name.invalid", 53) is None
    assert resolve("::1", 53) == "::1"


def test_an_address_is_never_resolved() -> None:
    asked: list[str] = []
    target = Target("127.0.0.1", 53, resolver=lambda host, port: asked.append(host) or None)
    engine = Engine()
    target.follow(engine, monotonic_ns() + 10 * RESOLVE_EVERY_NS)
    assert target.address == "127.0.0.1" and asked == [] and engine.addresses == []


def answered(target: Target, engine: Engine, now_ns: int) -> None:
    """follow() at now_ns, the question it asked (if any) answered, and follow() again:
    the driver's next turn, which hands the answer on."""
    target.follow(engine, now_ns)
    if target.asking is not None:
        target.asking.join(10.0)
    target.follow(engine, now_ns)


def test_a_name_is_asked_again_once_a_second_and_a_change_handed_on() -> None:
    answers: list[str | None] = ["127.0.0.2"]
    asked: list[str] = []

    def resolver(host: str, port: int) -> str | None:
        asked.append(host)
        return answers[-1]

    target = Target("dns.test", 853, resolver=resolver)
    assert target.address == "127.0.0.2" and asked == ["dns.test"]
    engine = Engine()
    first = target.next_ns
    answered(target, engine, first - 1)  # less than a second since: not asked
    assert len(asked) == 1
    answered(target, engine, first)  # the same answer: the engine keeps its address
    assert len(asked) == 2 and engine.addresses == []
    answers.append("127.0.0.3")
    answered(target, engine, first + 1)  # asked a moment ago: not yet
    assert len(asked) == 2 and engine.addresses == []
    answered(target, engine, first + RESOLVE_EVERY_NS)
    assert engine.addresses == [("127.0.0.3", 853)] and target.address == "127.0.0.3"
    answers.append(None)  # no longer resolves: no address, each connect fails
    answered(target, engine, first + 2 * RESOLVE_EVERY_NS)
    assert engine.addresses[-1] == (None, 853) and target.address is None


def test_a_slow_answer_is_waited_for_not_asked_twice() -> None:
    """The question runs beside the loop: follow() returns while it is open, asks no
    second one meanwhile, and hands the answer on once it came."""
    release = threading.Event()
    asked: list[str] = []

    def resolver(host: str, port: int) -> str | None:
        asked.append(host)
        if len(asked) > 1:
            release.wait(10.0)
        return f"127.0.0.{len(asked)}"

    target = Target("dns.test", 53, resolver=resolver)
    engine = Engine()
    due = target.next_ns
    target.follow(engine, due)  # asks, and returns at once
    target.follow(engine, due + 5 * RESOLVE_EVERY_NS)  # still asking: no second question
    assert engine.addresses == [] and target.asking is not None
    release.set()
    target.asking.join(10.0)
    assert len(asked) == 2
    target.follow(engine, due + 5 * RESOLVE_EVERY_NS)
    assert engine.addresses == [("127.0.0.2", 53)]
