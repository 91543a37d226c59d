"""The route handlers of `marin ui`, one module per group of pages; `marin.ui.app` maps URLs to them.

Each handler takes the `Site` it serves and the request, and only reads.
"""
