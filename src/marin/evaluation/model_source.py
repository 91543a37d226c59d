"""The model an evaluation scores: a train step's export, a Hugging Face folder or URL, or a hub id.

`ModelSource` is what `evaluate(model=...)` becomes once declared. Its identity, and so the
evaluation's key, is:
- a step (a `train_lm` handle or StepSpec): the step's name, its key reaching ours through the
  dependency;
- a folder (local path, or an `s3://` / `gs://` URL): its files' digests, as the step's declared
  inputs (`StepSpec.inputs`), so replacing a weight file reruns the evaluation; the path itself is
  not keyed, so moving the folder keeps the key;
- a hub id (`ORG/NAME`, `ORG/NAME@REVISION`): the commit its revision resolves to when declared
  (from the local Hugging Face cache when offline).

`local_folder()` gives the running step a local folder to load, bringing a remote export into the
export cache (`export_cache`) and a hub model into the Hugging Face cache.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import storage
from marin.evaluation.errors import ModelSourceError

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?")
_COMMIT = re.compile(r"[0-9a-f]{40}")


class ModelKind(StrEnum):
    """Where an evaluated model comes from."""

    STEP = "step"
    FOLDER = "folder"
    HUB = "hub"


@dataclass(frozen=True)
class ModelSource:
    """A resolved `model=`: its kind, where it is (a step name, a path or URL, a hub id) and a hub revision.

    `config`, known when a step handle declares it, is the model's effective configuration (its
    architecture's config with every field, defaults included, and its LoRA settings): recorded in
    the results, so a comparison shows a setting even where the key leaves a default out. It is not
    part of the key, which holds the step's (and so its whole config's) key already.
    """

    kind: ModelKind
    location: str
    revision: str | None = None
    config: dict[str, Any] | None = field(default=None, compare=False)

    def describe(self) -> dict[str, Any]:
        """The key form: a step by name, a hub model by id and commit, a folder by nothing here
        (its files' digests are the step's declared inputs)."""
        if self.kind == ModelKind.STEP:
            return {"step": self.location}
        if self.kind == ModelKind.HUB:
            return {"hub": self.location, "revision": self.revision}
        return {"folder": "files in the step's inputs"}

    @property
    def inputs(self) -> tuple[str, ...]:
        """The declared input pattern that keys a folder's files."""
        return (storage.join(self.location, "*"),) if self.kind == ModelKind.FOLDER else ()

    def label(self) -> str:
        """How reports name the model: the step, the folder's name, or `ORG/NAME@rev`."""
        if self.kind == ModelKind.HUB:
            return f"{self.location}@{(self.revision or '')[:8]}"
        if self.kind == ModelKind.FOLDER:
            return storage.basename(self.location.rstrip("/"))
        return self.location


def from_string(value: str, field: str = "model") -> ModelSource:
    """A folder (a path that exists, or an `s3://`/`gs://` URL) or a hub id, checked now.

    ModelSourceError, naming `field`, for a folder without `config.json`, a string that is neither,
    or a hub id whose revision cannot be resolved (offline and not in the local cache).
    """
    if "://" in value:
        url = value.rstrip("/")
        if not storage.exists(storage.join(url, "config.json")):
            raise ModelSourceError(
                f"{field}={value!r}: no config.json in that folder; give the folder a Hugging Face export "
                "(save_pretrained) wrote"
            )
        return ModelSource(ModelKind.FOLDER, url)
    path = os.path.expanduser(value)
    if os.path.isdir(path) or value.startswith((".", "/", "~")):
        if not os.path.isdir(path):
            raise ModelSourceError(f"{field}={value!r}: no such folder")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ModelSourceError(
                f"{field}={value!r}: the folder has no config.json; give the folder a Hugging Face export "
                "(save_pretrained) wrote"
            )
        return ModelSource(ModelKind.FOLDER, os.path.abspath(path))
    if _HUB_ID.fullmatch(value):
        repo, _, revision = value.partition("@")
        return ModelSource(ModelKind.HUB, repo, resolve_revision(repo, revision or "main", field))
    raise ModelSourceError(
        f"{field}={value!r}: not a folder (none at that path) and not a hub id (ORG/NAME or ORG/NAME@REVISION)"
    )


def resolve_revision(repo: str, revision: str, field: str = "model") -> str:
    """The commit `revision` of hub model `repo` points to: a commit as given, else from the local
    cache (offline) or the hub."""
    if _COMMIT.fullmatch(revision):
        return revision
    from huggingface_hub import constants

    cached = _cached_commit(repo, revision, constants.HF_HUB_CACHE)
    if cached is not None:
        return cached
    offline = constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false")
    if offline:
        raise ModelSourceError(
            f"{field}={repo + '@' + revision if revision != 'main' else repo!r}: hub model not in the local cache "
            "and HF_HUB_OFFLINE is set; download it first (`hf download "
            f"{repo}`), pin a commit ({repo}@<40-hex sha>), or pass a local folder"
        )
    from huggingface_hub import HfApi

    try:
        return str(HfApi().model_info(repo, revision=revision).sha)
    except Exception as e:  # the hub's errors are many; each means the same here
        raise ModelSourceError(
            f"{field}={repo!r}: cannot resolve revision {revision!r} on the hub ({e})"
        ) from None


def _cached_commit(repo: str, revision: str, cache_dir: str) -> str | None:
    """The commit the local hub cache records for `repo` at `revision` (its `refs/` file), if any."""
    ref = os.path.join(cache_dir, f"models--{repo.replace('/', '--')}", "refs", revision)
    try:
        with open(ref, encoding="utf-8") as f:
            commit = f.read().strip()
    except OSError:
        return None
    return commit if _COMMIT.fullmatch(commit) else None


def hub_folder(source: ModelSource) -> str:
    """The local snapshot folder of a hub model at its resolved commit (downloaded when missing)."""
    from huggingface_hub import snapshot_download

    return snapshot_download(source.location, revision=source.revision)
