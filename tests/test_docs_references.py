"""Every file path and every `marin.` / `zephyr.` / `fray.` / `storage.` name the docs quote exists.

Docs that name a file or an attribute the code no longer has send a reader to nothing; this reads
README.md and docs/*.md and checks each backticked repository path and dotted name.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
QUOTED = re.compile(r"`([^`\s]+)`")
REPO_DIRS = ("src/", "tests/", "benchmarks/", "experiments/", "docs/", "infra/", "scripts/", ".ci/")
FILE_NAME = re.compile(r"^[\w./-]+/[\w.-]+\.(py|md|toml|sh|yaml|html)$")
DOTTED = re.compile(r"^(marin|zephyr|fray|storage|procpool|experiments)(\.\w+)+$")
FILE_SUFFIXES = (".py", ".md", ".toml", ".sh", ".yaml", ".json", ".html")
# Paths outside this repository that a doc names on purpose.
OUTSIDE = {"shared/ARCHITECTURE.md", "shared/BENCHMARKS.md"}


def _quoted():
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for token in QUOTED.findall(line):
                yield f"{doc.relative_to(ROOT)}:{number}", token.rstrip(".,:;)")


def _is_path(token: str) -> bool:
    return token.startswith(REPO_DIRS) or bool(FILE_NAME.match(token))


def _path_exists(token: str) -> bool:
    path = token.split("::")[0].split(":")[0]
    if any(c in path for c in "*<{$"):
        return True  # a pattern or a placeholder, not a file
    return path in OUTSIDE or (ROOT / path).exists() or (ROOT / "src" / path).exists()


def _name_exists(token: str) -> bool:
    parts = token.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def test_every_path_the_docs_quote_exists():
    missing = [
        f"{where}: {token}" for where, token in _quoted() if _is_path(token) and not _path_exists(token)
    ]
    assert not missing, "docs quote paths that are not in the repository:\n" + "\n".join(missing)


def test_every_module_and_attribute_the_docs_quote_exists():
    missing = [
        f"{where}: {token}"
        for where, token in _quoted()
        if DOTTED.match(token) and not token.endswith(FILE_SUFFIXES) and not _name_exists(token)
    ]
    assert not missing, "docs quote names the code does not have:\n" + "\n".join(missing)
