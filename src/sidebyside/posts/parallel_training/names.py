"""How the parallel-training post names its strategies and each framework's tool for them, in every
table and sentence."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["STRATEGY_NAMES", "TOOLS", "spoken_list"]

STRATEGY_NAMES = {"one_device": "one device", "data_parallel": "data parallel", "fully_sharded": "fully sharded",
                  "tensor_parallel": "2-D data × model", "manual": "manual collectives"}
TOOLS = {
    "torch": {"one_device": "eager", "data_parallel": "DistributedDataParallel", "fully_sharded": "FSDP2 fully_shard",
              "tensor_parallel": "DTensor parallelize_module", "manual": "torch.distributed.all_reduce"},
    "jax": {"one_device": "jit", "data_parallel": "jit + NamedSharding", "fully_sharded": "jit + NamedSharding",
            "tensor_parallel": "jit + 2-D NamedSharding", "manual": "shard_map + lax.pmean"},
}


def spoken_list(items: Sequence[str]) -> str:
    """``items`` as a sentence lists them: "a", "a and b", "a, b and c"; "none" for no items."""
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else "none"
