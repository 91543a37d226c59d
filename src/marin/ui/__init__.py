"""Marina, marin's web interface (`marin ui`): read-only pages over the records under a prefix.

Needs the `ui` extra (`pip install marin[ui]`). See docs/ui.md.
"""
