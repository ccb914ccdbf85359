# SPDX-License-Identifier: MIT
"""dmafs_bench - the modes of dmafs-bench(1), one module each (posix, place, models, host,
tp, fair, dataset), and what they share: rig (set-up and cleanup), args (options and
--help), table (the table layout, goals and ratios). Programs run as children: loaders
(models, under PYTHON), fresh with cold_child and ranks_child, tp_worker (torchrun),
dataloader_child (dataset's DataLoader row)."""
