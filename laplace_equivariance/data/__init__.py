"""Data for the experiments and the examples.

The data sets (``datasets``), tasks whose truth is known (``known_truth_tasks``),
augmentation (``augment``), batches held in memory (``tensor_batches``) and the examples a
loader yields (``loader_size``).
"""
