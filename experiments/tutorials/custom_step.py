"""A custom step: a plain function wrapped in a StepSpec and run by StepRunner."""

from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec

# Define a generic step (e.g., a preprocessing script)


def preprocess(): ...  # your data preprocessing code


preprocess_step = StepSpec(
    name="preprocess",
    fn=preprocess,
    deps=[],
    output_path="outputs/preprocess",
    hash_attrs={"param": 42},
)

# Run it (or any downstream steps that depend on it)

StepRunner().run([preprocess_step])
