"""Data parallelism without GPUs: a launcher of CPU ranks over gloo, and the agreement of ranks on a
failure before gradients are all-reduced."""
