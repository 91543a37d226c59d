"""zephyr: lazy, streaming, sharded dataset processing."""
