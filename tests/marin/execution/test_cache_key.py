"""Cache keys: reformatting keeps a key, real edits and parameters change it, the prefix never does."""

import atexit
import functools
import importlib.util
import itertools
import shutil
import tempfile
import textwrap
from pathlib import Path

from marin.execution.cache_key import code_fingerprint, diff_key_records, key_of, key_record
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec


_counter = itertools.count()
_module_dir = Path(tempfile.mkdtemp(prefix="marin-keys-"))
atexit.register(shutil.rmtree, _module_dir, True)


def _define(source: str):
    """Import `source` from a real file (fingerprints read source files) and return its `step`."""
    path = _module_dir / f"keys_mod_{next(_counter)}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.step


def test_fingerprint_ignores_docstrings_comments_and_formatting():
    plain = _define("""
        def step(path):
            total = sum([1, 2, 3])
            return {"total": total}
        """)
    reformatted = _define('''
        def step(path):
            """Adds numbers."""
            # a comment that changes nothing
            total = sum([1,
                         2, 3])


            return {'total': total}
        ''')
    assert code_fingerprint(plain) == code_fingerprint(reformatted)


def test_fingerprint_changes_with_a_real_edit():
    before = _define("""
        def step(path):
            return {"total": 1 + 2}
        """)
    after = _define("""
        def step(path):
            return {"total": 1 + 3}
        """)
    assert code_fingerprint(before) != code_fingerprint(after)


def _write(path, value):
    return {"value": value}


def test_partial_fingerprint_includes_json_bound_args_only():
    assert code_fingerprint(functools.partial(_write, value=1)) != code_fingerprint(functools.partial(_write, value=2))
    # Non-JSON bound arguments are left to hash_attrs: the fingerprint is the function's.
    assert code_fingerprint(functools.partial(_write, value=object())) == code_fingerprint(_write)


def _closure_over(value):
    def step(path):
        return {"value": value}

    return step


def _closure_calling(helper):
    def step(path):
        return helper(path)

    return step


def _double(path):
    return {"n": 2}


def _triple(path):
    return {"n": 3}


def test_closures_differing_only_in_captured_values_get_different_keys(tmp_path):
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    one, two = StepSpec(name="c", fn=_closure_over(1)), StepSpec(name="c", fn=_closure_over(2))
    assert runner.plan([one]).of(one).key != runner.plan([two]).of(two).key
    again = StepSpec(name="c", fn=_closure_over(1))
    assert runner.plan([again]).of(again).key == runner.plan([one]).of(one).key
    runner.run([one])
    assert runner.plan([one]).of(one).state == "cached"
    assert runner.plan([two]).of(two).state != "cached"  # no false cache hit from its twin's output


def test_closure_fingerprint_folds_in_captured_functions_and_skips_other_objects():
    assert code_fingerprint(_closure_calling(_double)) != code_fingerprint(_closure_calling(_triple))
    assert code_fingerprint(_closure_calling(_double)) == code_fingerprint(_closure_calling(_double))
    # Non-JSON captured values are left to hash_attrs/version: the fingerprint is the code's alone.
    assert code_fingerprint(_closure_over(object())) == code_fingerprint(_closure_over(object()))


def test_a_function_that_captures_itself_is_fingerprinted():
    def outer():
        def countdown(path, n=3):
            return {"n": n} if n == 0 else countdown(path, n - 1)

        return countdown

    assert code_fingerprint(outer()) == code_fingerprint(outer())


def test_key_covers_name_hash_attrs_version_and_dependency_keys():
    base = key_record("s", {"a": 1}, [("d", "k1")], None, "fp")
    assert key_of(base) == key_of(key_record("s", {"a": 1}, [("d", "k1")], None, "fp"))
    for changed in (
        key_record("t", {"a": 1}, [("d", "k1")], None, "fp"),
        key_record("s", {"a": 2}, [("d", "k1")], None, "fp"),
        key_record("s", {"a": 1}, [("d", "k2")], None, "fp"),
        key_record("s", {"a": 1}, [("d", "k1")], "v2", "fp"),
        key_record("s", {"a": 1}, [("d", "k1")], None, "fp2"),
    ):
        assert key_of(changed) != key_of(base)


def test_explicit_version_replaces_the_code_fingerprint():
    one = _define("def step():\n    return None\n")
    two = _define("def step():\n    return {'x': 1}\n")
    a = StepSpec(name="v", fn=one, version="1")
    b = StepSpec(name="v", fn=two, version="1")
    runner = StepRunner(prefix="/nonexistent-prefix-for-keys", progress=False)
    assert runner.plan([a]).of(a).key == runner.plan([b]).of(b).key


def test_key_does_not_depend_on_the_prefix(tmp_path):
    dep = StepSpec(name="dep", fn=functools.partial(_write, value=1), hash_attrs={"x": 1})
    top = StepSpec(name="top", fn=functools.partial(_write, value=2), deps=[dep])
    one = StepRunner(prefix=str(tmp_path / "one"), progress=False).plan([top])
    two = StepRunner(prefix=str(tmp_path / "moved" / "elsewhere"), progress=False).plan([top])
    assert one.of(top).key == two.of(top).key
    assert one.of(top).output_path.endswith(f"/top-{one.of(top).key[:8]}")


def test_diff_names_each_changed_field_old_and_new():
    old = key_record("s", {"lr": 0.1, "sub": {"n": 1}, "gone": True}, [("tok", "a" * 64)], None, "f" * 64)
    new = key_record("s", {"lr": 0.2, "sub": {"n": 1}, "added": 3}, [("tok", "b" * 64)], None, "e" * 64)
    changes = {c.field: (c.old, c.new) for c in diff_key_records(old, new)}
    assert changes == {
        "hash_attrs.lr": (0.1, 0.2),
        "hash_attrs.gone": (True, None),
        "hash_attrs.added": (None, 3),
        "code fingerprint": ("f" * 64, "e" * 64),
        "deps.tok": ("a" * 64, "b" * 64),
    }
