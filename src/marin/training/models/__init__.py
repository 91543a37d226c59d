"""The model architectures: one module per architecture."""
