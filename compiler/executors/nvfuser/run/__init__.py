"""Running nvFuser definitions: sharing, on-disk kernels, edge sizes, batched updates."""
