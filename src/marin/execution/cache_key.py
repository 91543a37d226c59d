"""Cache keys: a sha256 over the canonical JSON of a step's name, hash_attrs, dependencies, code and inputs.

The key record is what gets hashed, and it is stored in `.executor_info`, so a later plan can say
field by field what changed (`diff_key_records`). The code part is the explicit `version` when one
is given, otherwise the function's fingerprint (`fingerprint.py`). The inputs part lists each
declared input file's name, size and digest (`inputs.py`). Keys never mention a storage location,
so moving the prefix keeps every cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import orjson

from marin.execution.errors import StepDefinitionError
from marin.execution.fingerprint import code_fingerprint
from marin.execution.inputs import diff_inputs

__all__ = ["FieldChange", "canonical_json", "code_fingerprint", "diff_key_records", "key_of", "key_record"]

_SORTED = orjson.OPT_SORT_KEYS


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no whitespace: equal values give equal bytes."""
    return orjson.dumps(value, option=_SORTED)


def key_record(
    name: str,
    hash_attrs: Mapping[str, Any],
    dep_keys: Sequence[tuple[str, str]],
    version: str | None,
    fingerprint: str | None,
    inputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The dict a step's key is the hash of. `dep_keys` is (name, key) per dependency, in order;
    `inputs` (a step that declares none has no such field) is `InputScanner.record`'s."""
    code = {"version": version} if version is not None else {"fingerprint": fingerprint}
    record = {"name": name, "hash_attrs": hash_attrs, "deps": [list(d) for d in dep_keys], "code": code}
    if inputs is not None:
        record["inputs"] = inputs
    return record


def key_of(record: Mapping[str, Any]) -> str:
    """The sha256 hex digest of the canonical JSON of a key record."""
    try:
        return hashlib.sha256(canonical_json(record)).hexdigest()
    except TypeError as e:  # StepSpec validates hash_attrs; this guards records built elsewhere
        raise StepDefinitionError(f"step {record.get('name')!r}: key record is not JSON: {e}") from None


class FieldChange(msgspec.Struct, frozen=True, gc=False):
    """One difference between two key records: `field` went from `old` to `new` (None: absent).

    `note`, when set, says it in words instead (`inputs: raw/a.jsonl changed (size 1200 -> 1500)`).
    """

    field: str
    old: Any
    new: Any
    note: str = ""

    def __str__(self) -> str:
        if self.note:
            return f"{self.field}: {self.note}"
        return f"{self.field}: {_short(self.old)} -> {_short(self.new)}"


def _short(value: Any) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12]
    return text if len(text) <= 60 else text[:57] + "..."


def diff_key_records(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """What changed between two key records of the same step: hash_attrs fields, code, dependencies, inputs."""
    changes: list[FieldChange] = []
    _diff_values("hash_attrs", old.get("hash_attrs", {}), new.get("hash_attrs", {}), changes)
    old_code, new_code = old.get("code", {}), new.get("code", {})
    if old_code.get("version") != new_code.get("version"):
        changes.append(FieldChange("version", old_code.get("version"), new_code.get("version")))
    if old_code.get("fingerprint") != new_code.get("fingerprint") and "version" not in new_code:
        changes.append(
            FieldChange("code fingerprint", old_code.get("fingerprint"), new_code.get("fingerprint"))
        )
    old_deps = _dep_map(old.get("deps", []))
    new_deps = _dep_map(new.get("deps", []))
    for name in sorted(old_deps.keys() | new_deps.keys()):
        if old_deps.get(name) != new_deps.get(name):
            changes.append(FieldChange(f"deps.{name}", old_deps.get(name), new_deps.get(name)))
    old_inputs, new_inputs = old.get("inputs"), new.get("inputs")
    for name, what in diff_inputs(old_inputs, new_inputs):
        files_old = (old_inputs or {}).get("files", {}).get(name)
        files_new = (new_inputs or {}).get("files", {}).get(name)
        changes.append(FieldChange("inputs", {name: files_old}, {name: files_new}, note=f"{name} {what}"))
    if old.get("name") != new.get("name"):
        changes.append(FieldChange("name", old.get("name"), new.get("name")))
    return changes


def _dep_map(deps: Sequence[Sequence[str]]) -> dict[str, str]:
    return {str(d[0]): str(d[1]) for d in deps}


def _diff_values(where: str, old: Any, new: Any, out: list[FieldChange]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for k in sorted(old.keys() | new.keys(), key=str):
            if k not in new:
                out.append(FieldChange(f"{where}.{k}", old[k], None))
            elif k not in old:
                out.append(FieldChange(f"{where}.{k}", None, new[k]))
            else:
                _diff_values(f"{where}.{k}", old[k], new[k], out)
    elif canonical_json(old) != canonical_json(new):
        out.append(FieldChange(where, old, new))
