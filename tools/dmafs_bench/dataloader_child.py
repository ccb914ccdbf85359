# SPDX-License-Identifier: MIT
"""dataloader_child - the dataset mode's DataLoader row, under PYTHON (with torch): a
DataLoader (8 workers, batches of 256, shuffled) whose sample i is file i's bytes, over
the set's NFILES files in NDIRS folders below ROOT. Prints the seconds the loop took
(torch's import and the process's start are not counted).

usage: python dataloader_child.py ROOT NFILES NDIRS
"""

import os
import sys
import time

import torch
from torch.utils.data import DataLoader


class FileSamples:
    """A torch Dataset: sample i is file i's bytes as a uint8 tensor."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb", buffering=0) as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


def collate(b):
    return torch.stack(b) if len({x.numel() for x in b}) == 1 else b


def main():
    root, nfiles, ndirs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # the names of dataset.names()
    paths = [os.path.join(root, f"d{i % ndirs:05d}", f"f{i:08d}") for i in range(nfiles)]
    t0 = time.monotonic()
    dl = DataLoader(FileSamples(paths), batch_size=256, num_workers=8, shuffle=True,
                    collate_fn=collate)
    n = 0
    for batch in dl:
        n += len(batch)
    dt = time.monotonic() - t0
    if n != len(paths):
        sys.exit(f"dmafs-bench: dataset: the DataLoader gave {n} samples of {len(paths)}")
    print(dt)


if __name__ == "__main__":
    main()
