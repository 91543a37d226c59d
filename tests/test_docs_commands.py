"""Docs are tested: every command README.md and docs/*.md tell a user to type runs verbatim in a test.

A command is a line of a fenced ```bash / ```sh / ```shell / ```console block (or of an untagged
block whose lines start like a command: `marin ...`, `.venv/bin/...`), its trailing `# comment`
dropped and `\\`-continued lines joined; a `# or: COMMAND` comment is a command too. Each must appear,
character for character, in a test file under tests/ outside every test of the slow tier (so the
default tier, what CI runs, runs it), or in `CANNOT_RUN_HERE` below with the reason it cannot run in
the test suite.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
THIS = Path(__file__).resolve()

SHELL_TAGS = {"bash", "sh", "shell", "console", "zsh"}
# An untagged block is a shell block when its first line starts like one of these.
COMMAND_STARTS = (
    "marin ",
    ".venv/bin/",
    "python ",
    "bash ",
    "ray ",
    "pulumi ",
    "kubectl ",
    "gcloud ",
    "helm ",
    "docker ",
    "pip ",
)

NEEDS_GCP = "needs Google Cloud credentials and a real project"
NEEDS_PULUMI = "needs the pulumi CLI, a Pulumi backend and Google Cloud credentials"
NEEDS_K8S = "needs a Kubernetes cluster with the KubeRay operator"

CANNOT_RUN_HERE: dict[str, str] = {
    ".venv/bin/ray start --head --port=6379 --dashboard-host=0.0.0.0 --num-cpus=8": "the three-machine walkthrough's head; tests/ray_nodes.py starts heads on loopback instead",
    "RAY_AUTH_MODE=token .venv/bin/ray start --address=HEAD_IP:6379 --num-cpus=8": "joins a second machine to a head at HEAD_IP; tests/ray_nodes.py joins local worker nodes instead",
    ".venv/bin/marin submit --address http://HEAD_IP:8265 --prefix gs://YOUR_BUCKET/marin experiments/tutorials/demo.py": "needs a multi-machine cluster and a bucket; tests/test_readme_ray_commands.py submits to a local head",
    ".venv/bin/marin jobs list --address http://HEAD_IP:8265": "needs the three-machine cluster; tests/test_readme_ray_commands.py lists jobs on a local head",
    "bash scripts/test.sh": "it is the test run itself",
    "bash scripts/test.sh --all": "it is the test run itself, with the slow tier",
    ".venv/bin/python -m pytest tests/marin/execution/test_plan.py -q": "it is a test run itself",
    "python -m experiments.tutorials.post_train": "the full post-training tutorial takes about ten minutes; "
    "tests/marin/posttrain/test_post_train_tutorial.py runs its reduced form (POST_TRAIN_QUICK=1)",
    "python -m experiments.tutorials.scaling": "the full sweep trains for several minutes on 2 cores; "
    "tests/marin/experiment/test_scaling_tutorial.py runs its reduced size verbatim",
    ".venv/bin/python benchmarks/scaling_fit.py": "a benchmark at its full size (tens of seconds of one core; "
    "tests never time anything): tests/marin/scaling_laws/test_scaling_benchmark.py runs it at a reduced size",
    ".venv/bin/python -m pytest tests/infra tests/fray/test_kuberay_manifest.py -q": "it is a test run itself",
    ".venv/bin/python benchmarks/compare_replicates.py": "a benchmark at its full size (a few minutes; tests never "
    "time anything): tests/marin/evaluation/test_compare_benchmark.py runs it at a reduced size",
    'ray start --address=HEAD_IP:6379 --labels="ray.io/availability-region=us-central1,ray.io/market-type=spot"': "joins a second machine to a head at HEAD_IP; tests/fray runs labelled local nodes instead",
    ".venv/bin/marin jobs logs raysubmit_XXXX --follow --address http://127.0.0.1:8265": "raysubmit_XXXX stands for the id `marin submit` printed; tests/test_readme_ray_commands.py runs this "
    "command with the real id",
    ".venv/bin/marin jobs stop raysubmit_XXXX --address http://127.0.0.1:8265": "raysubmit_XXXX stands for the id `marin submit` printed; tests/test_readme_ray_commands.py runs this "
    "command with the real id",
    "helm repo add kuberay https://ray-project.github.io/kuberay-helm/": "needs the network and helm",
    "helm install kuberay-operator kuberay/kuberay-operator": NEEDS_K8S,
    "docker build -f deploy/Dockerfile -t ghcr.io/YOUR_ORG/marin:latest . && docker push ghcr.io/YOUR_ORG/marin:latest": "needs docker and a registry to push to",
    "kubectl apply -f deploy/kuberay-raycluster.yaml": NEEDS_K8S,
    "kubectl port-forward svc/marin-head-svc 8265:8265": NEEDS_K8S,
    "marin submit --address http://127.0.0.1:8265 --prefix gs://YOUR_BUCKET/marin experiments/tutorials/demo.py": f"{NEEDS_K8S} and a GCS bucket (tests/test_readme_ray_commands.py submits to a local head)",
    "gcloud auth application-default login": NEEDS_GCP,
    "cd infra": "only the start of the Pulumi session that follows, which needs credentials",
    "pulumi login": NEEDS_PULUMI,
    "pulumi stack init gpu": NEEDS_PULUMI,
    "pulumi config set marin-infra:project YOUR_PROJECT": NEEDS_PULUMI,
    "pulumi config set marin-infra:bucketName YOUR_PROJECT-marin": NEEDS_PULUMI,
    'pulumi config set --secret marin-infra:uiToken "$(openssl rand -hex 16)"': NEEDS_PULUMI,
    "pulumi up --target 'urn:pulumi:gpu::marin-infra::gcp:projects/service:Service::artifactregistry' "
    "--target 'urn:pulumi:gpu::marin-infra::gcp:artifactregistry/repository:Repository::marin-images'": NEEDS_PULUMI,
    "IMAGE=$(pulumi stack output image)": NEEDS_PULUMI,
    "gcloud auth configure-docker us-central1-docker.pkg.dev": NEEDS_GCP,
    '(cd .. && docker build -f deploy/Dockerfile -t "$IMAGE" . && docker push "$IMAGE")': f"{NEEDS_GCP} and docker",
    "pulumi up": NEEDS_PULUMI,
    "gcloud container clusters get-credentials marin --region us-central1 --project YOUR_PROJECT": NEEDS_GCP,
    "kubectl -n marin port-forward svc/marin-head-svc 8265:8265 &": NEEDS_K8S,
    "export MARIN_PREFIX=$(pulumi stack output marinPrefix)": NEEDS_PULUMI,
    'marin submit --address http://127.0.0.1:8265 --prefix "$MARIN_PREFIX" experiments/tutorials/demo.py': f"{NEEDS_K8S} and the stack's bucket (tests/test_readme_ray_commands.py submits to a local head)",
    "gcloud run services proxy marin-ui --region us-central1 --project YOUR_PROJECT --port 8642": NEEDS_GCP,
    "pulumi destroy": NEEDS_PULUMI,
    "pulumi stack rm gpu": NEEDS_PULUMI,
}


def _commands_of_block(lines: list[str]) -> list[str]:
    commands: list[str] = []
    pending = ""
    for raw in lines:
        line = raw.strip()
        if not pending and line.startswith("#"):
            alternative = re.match(r"#\s*or:\s*(.+)$", line)
            if alternative:
                commands.append(alternative.group(1).strip())
            continue
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            commands.append(line)
    return commands


def documented_commands() -> dict[str, list[str]]:
    """{command: [the docs that show it]} over README.md and docs/*.md."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        for tag, body in re.findall(r"^```([\w-]*)[^\n]*\n(.*?)^```", doc.read_text(), re.S | re.M):
            lines = body.splitlines()
            first = next((line.strip() for line in lines if line.strip()), "")
            if tag in SHELL_TAGS or (not tag and first.startswith(COMMAND_STARTS)):
                for command in _commands_of_block(lines):
                    found.setdefault(command, []).append(doc.name)
    return found


def _is_slow_mark(node: ast.expr) -> bool:
    """`pytest.mark.slow` (or `mark.slow`), alone or in a list of marks."""
    if isinstance(node, ast.List | ast.Tuple):
        return any(_is_slow_mark(element) for element in node.elts)
    return isinstance(node, ast.Attribute) and node.attr == "slow"


def default_tier_source(source: str) -> str:
    """`source` without what only the slow tier runs: a module marked slow is empty, and a test
    function decorated `@pytest.mark.slow` is cut out (one with slow parameters runs in both tiers)."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            if _is_slow_mark(node.value):
                return ""
    lines = source.splitlines(keepends=True)
    for node in reversed(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            _is_slow_mark(d) for d in node.decorator_list
        ):
            first = min(d.lineno for d in node.decorator_list) - 1
            del lines[first : node.end_lineno]
    return "".join(lines)


def _test_sources() -> str:
    """The source every default-tier test file runs: a documented command must run in the tier CI runs."""
    files = sorted(p for p in (ROOT / "tests").rglob("*.py") if p.resolve() != THIS)
    return "\n".join(default_tier_source(p.read_text()) for p in files)


def test_the_extractor_finds_the_commands_of_every_kind_of_block():
    commands = documented_commands()
    assert "marin gc marin-outputs --keep-latest 2" in commands  # an untagged block (docs/execution.md)
    assert (
        ".venv/bin/marin run experiments/tutorials/demo.py --cluster ray:127.0.0.1:6379" in commands
    )  # `# or:`
    assert (
        "pulumi up --target 'urn:pulumi:gpu::marin-infra::gcp:projects/service:Service::artifactregistry' "
        "--target 'urn:pulumi:gpu::marin-infra::gcp:artifactregistry/repository:Repository::marin-images'"
        in commands
    )  # continued lines, joined
    assert (
        "marin ui" in commands and "# then browse http://127.0.0.1:8642/?token=THE_UI_TOKEN" not in commands
    )
    assert not any(
        c.startswith("from ") or c.startswith(">>>") for c in commands
    )  # python blocks are not shell


def test_every_documented_command_runs_verbatim_in_a_test_or_says_why_it_cannot():
    sources = _test_sources()
    missing = [
        f"{command}   ({', '.join(docs)})"
        for command, docs in documented_commands().items()
        if command not in CANNOT_RUN_HERE and command not in sources
    ]
    assert not missing, (
        "documented commands that no test runs verbatim (add a test, or to CANNOT_RUN_HERE "
        "with the reason):\n" + "\n".join(missing)
    )


def test_every_command_that_cannot_run_here_is_still_documented():
    stale = sorted(set(CANNOT_RUN_HERE) - set(documented_commands()))
    assert not stale, f"CANNOT_RUN_HERE names commands the docs no longer show: {stale}"


def test_a_command_only_a_slow_test_runs_does_not_count():
    source = (
        "import pytest\n\n"
        "@pytest.mark.slow\n"
        "def test_full():\n    run('marin full-size')\n\n"
        "@pytest.mark.parametrize('n', [1, pytest.param(2, marks=pytest.mark.slow)])\n"
        "def test_both(n):\n    run('marin reduced')\n"
    )
    kept = default_tier_source(source)
    assert "marin reduced" in kept and "marin full-size" not in kept
    assert default_tier_source("import pytest\npytestmark = [pytest.mark.slow]\nCOMMAND = 'marin x'\n") == ""
