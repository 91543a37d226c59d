"""zephyr is a leaf library: importing every one of its modules, in a fresh interpreter, loads no
module of marin or fray."""

import json
import subprocess
import sys

LOAD_ALL = """
import importlib, json, pkgutil, sys
import zephyr
for info in pkgutil.walk_packages(zephyr.__path__, "zephyr."):
    importlib.import_module(info.name)
print(json.dumps({
    "zephyr": sorted(m for m in sys.modules if m == "zephyr" or m.startswith("zephyr.")),
    "foreign": sorted(m for m in sys.modules if m.split(".")[0] in ("marin", "fray")),
}))
"""


def test_importing_all_of_zephyr_loads_no_marin_or_fray_module():
    out = subprocess.run(
        [sys.executable, "-c", LOAD_ALL], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert {"zephyr.io", "zephyr.backends.ray_backend", "zephyr.dataset"} <= set(loaded["zephyr"])
    assert loaded["foreign"] == []
