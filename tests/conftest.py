import os

# Ultralytics must never wait on the network in tests; keep its logs quiet.
os.environ["YOLO_OFFLINE"] = "1"
os.environ.setdefault("YOLO_VERBOSE", "False")
