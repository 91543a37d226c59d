"""Checking provenance: `marin verify OUTPUT` (files against the manifest) and `marin diff A B`
(how two outputs' key records and provenance differ, field by field)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marin.execution.artifact import is_output_file
from marin.execution.cache_key import FieldChange, canonical_json, diff_key_records
from marin.execution.errors import MarinError
from marin.execution.explain import output_records
from marin.execution.manifest import ManifestCheck, check_manifest
from marin.execution.states import StepState

# The key record's fields `diff_key_records` compares; any other (e.g. declared inputs) is compared generically.
_KEY_FIELDS = frozenset({"name", "hash_attrs", "deps", "code"})


def verify_output(path: str) -> ManifestCheck:
    """Re-check the files of a finished output against its `.artifact.json` manifest.

    MarinError when `path` is no finished step output (no SUCCESS status or no manifest).
    """
    records = output_records(path)
    state = records.status.state if records.status is not None else None
    if state != StepState.SUCCESS:
        raise MarinError(
            f"{records.path} is not a finished output (state {state or 'unknown'}); only a SUCCESS "
            "output has a manifest to verify"
        )
    if records.artifact is None:
        raise MarinError(f"{records.path}/.artifact.json is missing or has no file manifest")
    return check_manifest(records.path, records.artifact.files, is_output_file)


@dataclass(frozen=True)
class OutputDiff:
    """How output B differs from output A: one FieldChange per differing field, by section."""

    a: str
    b: str
    sections: dict[str, list[FieldChange]]

    @property
    def same(self) -> bool:
        return not any(self.sections.values())

    def lines(self) -> list[str]:
        """`section  field: old -> new` per difference, sections in a fixed order."""
        out = [f"a: {self.a}", f"b: {self.b}"]
        for section, changes in self.sections.items():
            out += [f"{section:<11}{change}" for change in changes]
        if self.same:
            out.append("no differences in key records or provenance")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "sections": {
                s: [{"field": c.field, "a": c.old, "b": c.new} for c in cs] for s, cs in self.sections.items()
            },
        }


def diff_outputs(a: str, b: str) -> OutputDiff:
    """Compare two outputs' `.executor_info`: key, hash_attrs, deps, code, inputs, versions, git, run."""
    ra, rb = output_records(a), output_records(b)
    for records in (ra, rb):
        if records.info is None:
            raise MarinError(
                f"{records.path} has no .executor_info (the step never finished); nothing to compare"
            )
    ia, ib = ra.info, rb.info
    ka, kb = ia.key_record or {}, ib.key_record or {}
    names = ("key", "hash_attrs", "deps", "code", "inputs", "versions", "git", "run")
    sections: dict[str, list[FieldChange]] = {s: [] for s in names}
    _diff("key", ia.key, ib.key, sections["key"])
    key_changes = diff_key_records(ka, kb)
    for change in key_changes:
        section = change.field.split(".", 1)[0]
        if section == "name":
            sections["key"].append(change)
        elif section in ("version", "code fingerprint"):
            sections["code"].append(change)
        else:
            sections[section if section in sections else "hash_attrs"].append(change)
    reported = {c.field.split(".", 1)[0].split(":", 1)[0] for c in key_changes}
    for extra in sorted((ka.keys() | kb.keys()) - _KEY_FIELDS - reported):
        _diff(extra, ka.get(extra), kb.get(extra), sections["inputs"])
    _diff("fn", ia.fn, ib.fn, sections["code"])
    ea, eb = ia.environment or {}, ib.environment or {}
    _diff("python", ea.get("python"), eb.get("python"), sections["versions"])
    _diff(
        "distributions",
        ea.get("distributions") or ea.get("packages"),
        eb.get("distributions") or eb.get("packages"),
        sections["versions"],
    )
    _diff("git", _git_summary(ia.git), _git_summary(ib.git), sections["git"])
    _diff("experiment", ia.experiment, ib.experiment, sections["run"])
    _diff("command_line", ia.command_line, ib.command_line, sections["run"])
    return OutputDiff(ra.path, rb.path, sections)


def _git_summary(git: Any) -> Any:
    """The git record with a dirty tree's diff text replaced by its sha256 (the text itself is too long to show)."""
    if not isinstance(git, Mapping):
        return git
    out = dict(git)
    experiment = out.get("experiment")
    if isinstance(experiment, Mapping) and "diff" in experiment:
        import hashlib

        experiment = dict(experiment)
        experiment["diff"] = "sha256:" + hashlib.sha256(str(experiment["diff"]).encode()).hexdigest()[:16]
        out["experiment"] = experiment
    return out


def _diff(where: str, a: Any, b: Any, out: list[FieldChange]) -> None:
    """Append a FieldChange per leaf of two JSON values that differs (dicts key by key, lists of one
    length item by item)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(a.keys() | b.keys(), key=str):
            _diff(f"{where}.{k}", a.get(k), b.get(k), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(f"{where}[{i}]", x, y, out)
    elif canonical_json(a) != canonical_json(b):
        out.append(FieldChange(where, a, b))
