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
    return _define_module(source).step


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
    assert code_fingerprint(functools.partial(_write, value=1)) != code_fingerprint(
        functools.partial(_write, value=2)
    )
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


def _key(spec, prefix="/nonexistent-prefix-for-keys"):
    return StepRunner(prefix=prefix, progress=False).plan([spec]).of(spec).key


def test_numbers_are_canonical_but_bool_stays_apart_from_int():
    def key_of_attrs(attrs):
        return _key(StepSpec(name="n", fn=_double, hash_attrs=attrs))

    assert key_of_attrs({"lr": 1}) == key_of_attrs({"lr": 1.0})
    assert key_of_attrs({"lr": [2, {"x": -0.0}]}) == key_of_attrs({"lr": (2.0, {"x": 0})})
    assert key_of_attrs({"lr": 1}) != key_of_attrs({"lr": True})
    assert key_of_attrs({"lr": 0}) != key_of_attrs({"lr": False})
    assert key_of_attrs({"lr": 0.5}) != key_of_attrs({"lr": 1})
    assert key_of_attrs({"n": 2**53 + 1}) != key_of_attrs({"n": 2**53})


def test_strings_are_nfc_in_values_and_keys():
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert composed != decomposed
    a = StepSpec(name="s", fn=_double, hash_attrs={composed: [composed]})
    b = StepSpec(name="s", fn=_double, hash_attrs={decomposed: [decomposed]})
    assert _key(a) == _key(b)
    assert code_fingerprint(_closure_over(composed)) == code_fingerprint(_closure_over(decomposed))
    assert code_fingerprint(_closure_over(1)) == code_fingerprint(_closure_over(1.0))
    assert code_fingerprint(_closure_over(1)) != code_fingerprint(_closure_over(True))
    assert code_fingerprint(_closure_over(2**70)) != code_fingerprint(_closure_over(2**70 + 1))


def test_a_json_global_read_by_fn_is_part_of_its_key():
    module = _define_module("""
        THRESHOLD = 0.5
        UNUSED = 1
        def step(path):
            return {"t": THRESHOLD}
        """)
    before = code_fingerprint(module.step)
    module.UNUSED = 2
    assert code_fingerprint(module.step) == before  # a global the code never reads is not part of it
    module.THRESHOLD = 0.75
    assert code_fingerprint(module.step) != before
    module.THRESHOLD = 0.5
    assert code_fingerprint(module.step) == before


def test_same_package_callees_count_recursively_and_cycles_end():
    module = _define_module("""
        LIMIT = 3
        def even(n):
            return n == 0 or odd(n - 1)
        def odd(n):
            return n != 0 and even(n - 1) and n < LIMIT
        def step(path):
            return {"even": even(4)}
        """)
    before = code_fingerprint(module.step)
    assert code_fingerprint(module.step) == before  # the cycle even -> odd -> even is cut the same way
    module.LIMIT = 4  # read by odd(), which even() calls, which step() calls
    assert code_fingerprint(module.step) != before


def test_a_global_read_by_a_called_helper_changes_the_key_within_and_across_plans(tmp_path):
    module = _define_module("""
        SCALE = 2
        def helper(x):
            return x * SCALE
        def make(name):
            def step(path):
                return {"v": helper(1), "name": name}
            return step
        """)
    steps = [StepSpec(name=f"h{i}", fn=module.make(f"h{i}")) for i in range(3)]
    runner = StepRunner(prefix=str(tmp_path), progress=False)
    before = [runner.plan(steps).of(s).key for s in steps]
    module.SCALE = 3
    after = [runner.plan(steps).of(s).key for s in steps]
    assert all(a != b for a, b in zip(before, after, strict=False))
    assert code_fingerprint(module.make("x")) != code_fingerprint(module.make("y"))


def test_an_edited_function_in_a_reimported_module_changes_the_key(tmp_path):
    path = tmp_path / "edited_mod.py"

    def load():
        spec = importlib.util.spec_from_file_location("edited_mod", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def make_source(n):
        return textwrap.dedent(f"""
            def make(name):
                def fn(output_path):
                    return {{"name": name, "n": {n}}}
                return fn
            """)

    path.write_text(make_source(1))
    first = load()
    key_a = _key(StepSpec(name="e", fn=first.make("x")), str(tmp_path / "out"))
    assert _key(StepSpec(name="e", fn=first.make("x")), str(tmp_path / "out")) == key_a  # memo hit: same key
    path.write_text(make_source(2) + "\n# longer, so size and mtime both differ\n")
    second = load()
    assert _key(StepSpec(name="e", fn=second.make("x")), str(tmp_path / "out")) != key_a


def test_closures_of_one_factory_keep_their_own_captured_values_after_memoization():
    fps = [code_fingerprint(_closure_over(i)) for i in range(50)]
    assert len(set(fps)) == 50
    assert code_fingerprint(_closure_over(7)) == fps[7]


def _define_module(source: str):
    """Import `source` from a real file as a fresh module."""
    path = _module_dir / f"keys_mod_{next(_counter)}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
