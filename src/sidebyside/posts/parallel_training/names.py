"""How the parallel-training post names its strategies and each framework's tool for them, in every
table and sentence."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["STRATEGY_NAMES", "TOOLS", "COUNTERPART", "spoken_list"]

STRATEGY_NAMES = {"one_device": "one device", "data_parallel": "data parallel", "fully_sharded": "fully sharded",
                  "fully_sharded_kept": "fully sharded (parameters kept for backward)",
                  "tensor_parallel": "2-D data × model", "manual": "manual collectives"}
TOOLS = {
    "torch": {"one_device": "eager", "data_parallel": "DistributedDataParallel",
              "fully_sharded": "FSDP2 fully_shard, reshard_after_forward=True",
              "fully_sharded_kept": "FSDP2 fully_shard, reshard_after_forward=False",
              "tensor_parallel": "DTensor parallelize_module", "manual": "torch.distributed.all_reduce"},
    "jax": {"one_device": "jit", "data_parallel": "jit + NamedSharding",
            "fully_sharded": "shard_map + lax.all_gather, gradients reduce-scattered",
            "fully_sharded_kept": "shard_map + lax.all_gather, gradients reduce-scattered",
            "tensor_parallel": "jit + 2-D NamedSharding", "manual": "shard_map + lax.pmean"},
}
#: A PyTorch-only strategy -> the JAX strategy it races: FSDP2 with ``reshard_after_forward=False``
#: against JAX's one fully sharded program, which gathers each parameter once a step.
COUNTERPART = {"fully_sharded_kept": "fully_sharded"}


def spoken_list(items: Sequence[str]) -> str:
    """``items`` as a sentence lists them: "a", "a and b", "a, b and c"; "none" for no items."""
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else "none"
