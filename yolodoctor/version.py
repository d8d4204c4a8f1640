"""The package's version and the version of the run-directory record it writes."""

__version__ = "0.1.0"
SCHEMA = 1
