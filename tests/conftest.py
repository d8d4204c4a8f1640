import os
import sys
from pathlib import Path

# Ultralytics must never wait on the network in tests; keep its logs quiet.
os.environ["YOLO_OFFLINE"] = "1"
os.environ.setdefault("YOLO_VERBOSE", "False")
sys.path.insert(0, str(Path(__file__).parent))  # tests/fakes.py
