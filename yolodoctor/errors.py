"""Errors that mean "the command could not run" (exit 2, one line on stderr, DESIGN.md section 3)."""


class YoloDoctorError(Exception):
    """Base class: the message is one sentence a user can act on."""

    exit_code = 2


class UsageError(YoloDoctorError):
    """Bad command line: an unknown KEY, a value of the wrong type, a missing argument."""


class InputError(YoloDoctorError):
    """An input the command needs exists in name only: a missing or unreadable file, a broken run directory."""
