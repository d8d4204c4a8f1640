"""yolodoctor: find out why an Ultralytics YOLO training run is slow, and fix it.

Importing this package is cheap: torch and ultralytics are imported only by the commands that need them.
"""

__version__ = "0.1.0"
SCHEMA = 1

__all__ = ["SCHEMA", "__version__"]
