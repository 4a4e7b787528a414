"""Python helpers for lakecache mounts. Pure Python; importing it does not import torch.

The order hint is here (lakecache.hint). The native data path is in modules imported on their own:
lakecache.native (files, batches, zero-copy views), lakecache.fsspec (protocol "lakecache") and
lakecache.datasets (PyTorch); they need the extension lakecache._native (python/README.md).
"""
from lakecache.hint import OrderHintSampler, mount_root, write_order

__all__ = ["OrderHintSampler", "mount_root", "write_order"]
