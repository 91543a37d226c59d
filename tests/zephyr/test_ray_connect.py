"""zephyr's ray backend connects a fresh process to a running cluster by itself (no fray): through
RAY_ADDRESS, with Ray's auth token though RAY_AUTH_MODE is unset, and with the driver's own code
directory on the workers' import path."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("ray")

DRIVER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])  # the user's code: on no worker's path unless zephyr passes it on
    import userfns
    from zephyr import Dataset

    rows = Dataset.from_list([{"n": i} for i in range(6)], num_shards=2).map(userfns.double)
    result = sorted(r["n"] for r in rows.collect(backend="ray", quiet=True))
    import ray
    print(json.dumps({
        "result": result,
        "address": ray.get_runtime_context().gcs_address,
        "foreign": sorted(m for m in sys.modules if m.split(".")[0] in ("marin", "fray")),
    }))
""")


def test_ray_backend_connects_a_fresh_process_to_the_running_cluster(ray_nodes, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "userfns.py").write_text("def double(row):\n    return {'n': 2 * row['n']}\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"} | {"RAY_ADDRESS": ray_nodes.address}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(code)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["result"] == [0, 2, 4, 6, 8, 10]
    assert seen["address"].rsplit(":", 1)[1] == ray_nodes.address.rsplit(":", 1)[1]  # its head, not a new Ray
    assert seen["foreign"] == []
