"""Errors that reach the user as one readable line, each with its exit code.

Exit codes are a contract shared by every command (docs/architecture.md, "Exit codes"):
0 ok, 1 a check or criterion failed, 2 bad input or a target that could not
be started, 3 internal error.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class SoakError(Exception):
    """Base of every error soak reports itself; the message is one line."""

    exit_code = EXIT_INTERNAL


class InputError(SoakError):
    """Bad input: a scenario, a plan, a query file or a command-line value."""

    exit_code = EXIT_BAD_INPUT


class UnsafeTargetError(InputError):
    """A target address outside loopback that `allow_targets` does not name."""


class TargetStartError(SoakError):
    """A target (or helper service) that could not be started or never got ready."""

    exit_code = EXIT_BAD_INPUT


class RunError(SoakError):
    """A run that ended `error` after the pre-flight: its target exited or never got
    ready, or a fault ended it (docs/bad-input.md: exit 2, as a target that cannot start)."""

    exit_code = EXIT_BAD_INPUT


class CheckFailed(SoakError):
    """A check or a pass/fail criterion failed."""

    exit_code = EXIT_FAILED


class SinkError(SoakError):
    """A time-series sink that did not accept a write (the caller spools)."""


def not_utf8(exc: UnicodeDecodeError) -> str:
    """`not UTF-8 text (byte 0xff at offset 12)`: where, not Python's codec message."""
    return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
