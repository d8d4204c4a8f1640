"""An Ultralytics training script whose train loader has worker processes even on the CPU (the trainer forces
workers=0 there; this custom trainer gives it one back), so that a test can kill a train-loader worker mid-run:
`python train_with_workers.py DATA_YAML PROJECT`."""

import sys

from ultralytics import YOLO
from ultralytics.models.yolo.detect import DetectionTrainer


class OneWorkerTrainer(DetectionTrainer):
    def get_dataloader(self, dataset_path, batch_size=16, rank=0, mode="train"):
        self.args.workers = 1 if mode == "train" else 0
        return super().get_dataloader(dataset_path, batch_size, rank, mode)


YOLO("yolo11n.yaml").train(trainer=OneWorkerTrainer, data=sys.argv[1], imgsz=64, batch=4, epochs=100, plots=False,
                           project=sys.argv[2], name="workers")
