"""Python helpers for lakecache mounts. Pure Python; importing it does not import torch."""
from lakecache.hint import OrderHintSampler, mount_root, write_order

__all__ = ["OrderHintSampler", "mount_root", "write_order"]
