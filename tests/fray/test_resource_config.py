"""ResourceConfig: sizes parse, devices validate, and a bad declaration fails when it is written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fray.cluster import CpuConfig, GpuConfig, ResourceConfig, ResourceConfigError, TpuConfig
from marin.execution.step_spec import StepSpec


def test_sizes_parse_to_bytes_in_decimal_and_binary_units():
    assert ResourceConfig(ram="4GiB").ram == 4 * 1024**3
    assert ResourceConfig(ram="512MB").ram == 512 * 1000**2
    assert ResourceConfig(ram="1.5 G", disk="2Gi").ram == 1_500_000_000
    assert ResourceConfig(disk="2Gi").disk == 2 * 1024**3
    assert ResourceConfig(ram=1234).ram == 1234


def test_a_size_that_is_not_a_size_is_rejected_with_how_to_write_it():
    with pytest.raises(ResourceConfigError) as err:
        ResourceConfig(ram="4 gigs")
    assert str(err.value) == "ram='4 gigs' is not a size; write it like '4GiB' or '512MB' or an int of bytes"
    with pytest.raises(ResourceConfigError, match=r"disk=-5 is negative"):
        ResourceConfig(disk=-5)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ResourceConfig(cpu=-1), r"cpu=-1 is negative"),
        (lambda: ResourceConfig(cpu="four"), r"cpu='four' is not a number of cores"),
        (lambda: ResourceConfig.with_gpu("H100", 0), r"count=0 must be a whole number >= 1"),
        (lambda: ResourceConfig.with_gpu("H 100"), r"type='H 100' is not a GPU type"),
        (
            lambda: ResourceConfig.with_tpu("tpu-big"),
            r"type='tpu-big' is not a TPU type; write it like 'v4-8'",
        ),
        (lambda: ResourceConfig.with_tpu("v4-8", topology="2by2"), r"topology='2by2' is not a topology"),
        (lambda: ResourceConfig(device="gpu"), r"device='gpu' is not a device"),
        (lambda: ResourceConfig(replicas=0), r"replicas=0 must be a whole number >= 1"),
        (lambda: ResourceConfig(regions="us-central1"), r"regions='us-central1' must be a list or tuple"),
        (lambda: ResourceConfig(env_vars={"A": 1}), r"env_vars\['A'\]=1 must be a string"),
        (lambda: ResourceConfig(env_vars={"A-B": "x"}), r"env_vars has the name 'A-B'"),
        (
            lambda: ResourceConfig(pip_packages=["lm-eval>>0.4"]),
            r"'lm-eval>>0.4', which is not a pip requirement",
        ),
        (lambda: ResourceConfig(preemptible="yes"), r"preemptible='yes' must be True or False"),
    ],
)
def test_bad_fields_are_rejected_at_declaration(build, message):
    with pytest.raises(ResourceConfigError, match=message):
        build()


def test_a_step_with_bad_resources_fails_when_declared_not_when_run():
    with pytest.raises(ResourceConfigError, match="ram='lots'"):
        StepSpec(name="train", fn=lambda: None, resources=ResourceConfig.with_cpu(2, ram="lots"))


def test_constructors_build_the_device_they_name():
    assert ResourceConfig.with_cpu().device == CpuConfig()
    assert ResourceConfig.with_cpu(4, ram="8GiB").cpu == 4.0
    gpu = ResourceConfig.with_gpu("H100", 8, cpu=16, ram="512GiB")
    assert gpu.device == GpuConfig("H100", 8) and gpu.gpu_count == 8 and gpu.cpu == 16.0
    tpu = ResourceConfig.with_tpu("v4-8", topology="2x2x1", preemptible=False)
    assert tpu.device == TpuConfig("v4-8", "2x2x1") and tpu.device.generation == "v4" and tpu.gpu_count == 0


def test_config_is_frozen_hashable_and_equal_by_value():
    a = ResourceConfig.with_cpu(2, ram="1GiB", env_vars={"X": "1"})
    b = ResourceConfig(cpu=2, ram=1024**3, env_vars={"X": "1"})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    with pytest.raises(AttributeError):
        a.cpu = 3


def test_to_json_is_a_complete_json_record():
    config = ResourceConfig.with_gpu(
        "A100", 2, ram="64GiB", regions=["us-east1"], pip_packages=["lm-eval>=0.4"]
    )
    record = json.loads(json.dumps(config.to_json()))
    assert record == {
        "cpu": 1.0,
        "ram": 64 * 1024**3,
        "disk": None,
        "device": {"kind": "gpu", "type": "A100", "count": 2},
        "preemptible": True,
        "regions": ["us-east1"],
        "replicas": 1,
        "env_vars": {},
        "pip_packages": ["lm-eval>=0.4"],
    }
    assert config.describe() == "cpu=1 ram=64GiB gpu=A100x2"


def test_importing_fray_cluster_does_not_import_ray():
    code = "import sys, fray.cluster; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
