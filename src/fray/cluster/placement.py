"""Where a step may run: a ResourceConfig's `regions` and `preemptible` as Ray node-label selectors.

Nodes say where they are with Ray's well-known labels (set by `ray start --labels`, by KubeRay from a
worker group's `labels`, or by Ray from the RAY_NODE_REGION / RAY_NODE_MARKET_TYPE environment):

- `ray.io/availability-region`: the node's cloud region, e.g. `us-central1`. `regions=(...)` runs a
  step only on nodes whose region is one of them; a node without the label is in no region.
- `ray.io/market-type`: `spot` (or `preemptible`) on a node that can be taken away; `on-demand` or
  no label otherwise. `preemptible=False` keeps a step off such nodes; `preemptible=True` (the
  default) lets it run anywhere, preemptible or not.

The selectors use only the forms Ray's label selector accepts: `v`, `!v`, `in(a,b)`, `!in(a,b)`.
`selector_matches` evaluates them the way Ray does, so RayCluster can tell at submission that no
node will ever match instead of leaving the task queued forever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fray.cluster.resource_config import ResourceConfig

# Ray's own keys (ray._raylet.RAY_NODE_REGION_KEY and RAY_NODE_MARKET_TYPE_KEY); spelled out here so
# that importing fray never imports ray.
REGION_LABEL = "ray.io/availability-region"
MARKET_TYPE_LABEL = "ray.io/market-type"
PREEMPTIBLE_MARKET_TYPES = ("spot", "preemptible")


def label_selector(resources: ResourceConfig) -> dict[str, str]:
    """The Ray `label_selector` that keeps a task on the nodes its `regions` and `preemptible` allow."""
    selector: dict[str, str] = {}
    if resources.regions:
        regions = list(dict.fromkeys(resources.regions))
        selector[REGION_LABEL] = regions[0] if len(regions) == 1 else f"in({','.join(regions)})"
    if not resources.preemptible:
        selector[MARKET_TYPE_LABEL] = f"!in({','.join(PREEMPTIBLE_MARKET_TYPES)})"
    return selector


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether a node with `labels` satisfies every condition of `selector`, as Ray's scheduler judges.

    A negated condition (`!v`, `!in(...)`) holds on a node that lacks the label; a positive one does not.
    """
    for key, condition in selector.items():
        negated = condition.startswith("!")
        body = condition[1:] if negated else condition
        values = {v.strip() for v in body[3:-1].split(",")} if body.startswith("in(") else {body}
        if (labels.get(key) in values) == negated:
            return False
    return True


def why_no_node_is_allowed(resources: ResourceConfig, node_labels: Sequence[Mapping[str, str]]) -> str | None:
    """Why none of the nodes (given by their labels) may run a task with `resources`, or None if one may.

    Names what the task asked for and what the cluster has, e.g. the regions its nodes are in.
    """
    selector = label_selector(resources)
    candidates = list(node_labels)
    for key, condition in selector.items():
        allowed = [labels for labels in candidates if selector_matches({key: condition}, labels)]
        if allowed:
            candidates = allowed
            continue
        if key == REGION_LABEL:
            regions = sorted({labels[REGION_LABEL] for labels in node_labels if REGION_LABEL in labels})
            return (
                f"it asks for regions={resources.regions!r} and no node is in "
                f"{'that region' if len(resources.regions) == 1 else 'any of them'} "
                f"(the cluster's regions: {', '.join(regions) or 'none; no node has a region label'}; a "
                f"node's region is its {REGION_LABEL} label); ask for one of the cluster's regions, or "
                f"add a node there (`ray start --labels {REGION_LABEL}={resources.regions[0]}`)"
            )
        where = f" in regions {', '.join(resources.regions)}" if resources.regions else ""
        return (
            f"it asks for preemptible=False and every node{where} is preemptible (labelled "
            f"{MARKET_TYPE_LABEL}={' or '.join(PREEMPTIBLE_MARKET_TYPES)}); allow preemptible=True, or add "
            f"an on-demand node (`ray start --labels {MARKET_TYPE_LABEL}=on-demand`)"
        )
    return None
