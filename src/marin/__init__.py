"""marin: declared pipelines of cached, content-addressed steps for foundation-model research."""
