"""Errors that mean "the command could not run" (exit 2, one line on stderr)."""


class YoloDoctorError(Exception):
    """Base class: the message is one sentence a user can act on."""

    exit_code = 2


class UsageError(YoloDoctorError):
    """Bad command line: an unknown KEY, a value of the wrong type, a missing argument."""


class InputError(YoloDoctorError):
    """An input the command needs exists in name only: a missing or unreadable file, a broken run directory."""


class OutputError(YoloDoctorError):
    """An output the command must write cannot be written (a full disk, a read-only folder)."""


class Interrupted(YoloDoctorError):
    """Ctrl-C or SIGTERM reached a command that runs trainings one after another (fix --verify / --apply): it stops
    there, and exits 130 (SIGINT) or 143 (SIGTERM) with the record of the interrupted run saved."""

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code
