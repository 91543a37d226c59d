"""Where and when tests run under pytest-xdist (`-n 2 --dist loadgroup`, what scripts/test.sh runs).

- **Shared fixtures stay shared.** A session fixture that costs a cluster or a training (SHARED) is
  built once per worker that uses it; so every test using one is put in that fixture's `xdist_group`,
  and one worker runs them all, one after another, on one copy. Likewise the tests of a module with
  a module-scoped fixture form one group (the module's path), so that fixture is built once. A test
  in an explicit group (its module's `pytestmark = pytest.mark.xdist_group(...)`) keeps that group.
- **Longest first.** Groups are scheduled before single tests, the largest first, so that no long
  group starts when the other worker is nearly done.
- **Stopped after its last user.** The tests of each SHARED fixture run one after another, and the
  fixture is torn down after the last of them (not at the session's end), so a Ray cluster does not
  idle on the CI machine's two cores through the rest of the suite.

Loaded by tests/conftest.py as a plugin (`pytest_plugins`). Without xdist the order and the early
teardown hold just the same.
"""

from __future__ import annotations

import pytest

# fixture -> its group: each is a session fixture costly enough that one copy must serve the suite.
SHARED = {
    "ray_nodes": "ray",  # tests/conftest.py: a two-node Ray cluster
    "pipeline": "ui-pipeline",  # tests/marin/ui/conftest.py: tokenize, train twice, evaluate
}


def _group(item: pytest.Item) -> str | None:
    marks = [
        m.args[0] if m.args else m.kwargs.get("name", "default") for m in item.iter_markers("xdist_group")
    ]
    return str(marks[0]) if marks else None


def _scopes(item: pytest.Item) -> dict[str, str]:
    """{fixture name: the scope of the definition this item gets}."""
    info = getattr(item, "_fixtureinfo", None)
    return {name: chain[-1].scope for name, chain in (info.name2fixturedefs.items() if info else ()) if chain}


def _shared_fixture(item: pytest.Item) -> str | None:
    scopes = _scopes(item)  # a session fixture of that name: a test's own `pipeline` is another thing
    return next((fixture for fixture in SHARED if scopes.get(fixture) == "session"), None)


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    return any(scope in ("module", "class") for scope in _scopes(item).values())


@pytest.hookimpl(wrapper=True)  # the ordering before xdist names each item's group, the check after
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    _order_by_group(items)
    result = yield
    _name_groups_in_node_ids(config, items)
    return result


def _name_groups_in_node_ids(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker under `--dist loadgroup`, end each grouped test's node id in `@GROUP`.

    The controller sends every test whose node id ends in the same `@GROUP` to one worker; xdist's
    worker adds that suffix by setting `item._nodeid`, which pytest 9 no longer reads (a node's id is
    `item._id`), so without this every group would be spread over both workers: two copies of a
    module's Ray cluster, two Ray heads starting at once, fixed-port and timing tests side by side.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(names))  # xdist's own form of the suffix
        if names and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)


def _order_by_group(items: list[pytest.Item]) -> None:
    groups: dict[str | None, list[pytest.Item]] = {}
    for item in items:
        group = _group(item)
        if group is None and (fixture := _shared_fixture(item)):
            group = SHARED[fixture]
            item.add_marker(pytest.mark.xdist_group(group))
        elif group is None and _uses_a_module_fixture(item):
            group = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
        groups.setdefault(group, []).append(item)
    ungrouped = groups.pop(None, [])
    ordered = []
    for _, members in sorted(groups.items(), key=lambda pair: -len(pair[1])):
        # a shared fixture's users first, so it can be stopped before the group's other tests run
        ordered += sorted(members, key=lambda item: _shared_fixture(item) is None)
    items[:] = ordered + ungrouped


def _finish(item: pytest.Item, fixture: str) -> None:
    """Tear down the session fixture `fixture` (and the fixtures built on it) now. pytest has no
    public call for this: it is what pytest does itself at the session's end."""
    for definition in item._fixtureinfo.name2fixturedefs.get(fixture, ()):
        definition.finish(item._request)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield
    fixture = _shared_fixture(item)
    if fixture and (nextitem is None or _shared_fixture(nextitem) != fixture):
        _finish(item, fixture)
    return result
