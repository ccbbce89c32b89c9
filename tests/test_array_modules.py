"""The array layer's modules after issue 39's split (core_ops.py by family, values.py into values,
number_text, printer and display): the names other layers still import from the old modules reach
the same objects, and a record's repr is still its printed form."""
import importlib

import numpy as np
import pytest

from tapeml.array import core_ops, values
from tapeml.array.printer import format_value
from tapeml.array.tape import Primitive
from tapeml.array.values import Dict, Record


@pytest.mark.parametrize("name", sorted(values._MOVED_TO))
def test_a_name_moved_out_of_values_is_the_new_modules_object(name):
    module = importlib.import_module(f"tapeml.array.{values._MOVED_TO[name]}")
    assert getattr(values, name) is getattr(module, name)


def test_core_ops_reexports_the_primitives_of_the_split_modules():
    from tapeml.array import arith_ops, elementwise_ops, matmul_ops, scale_ops, shape_ops
    homes = (arith_ops, elementwise_ops, matmul_ops, scale_ops, shape_ops)
    names = [n for n in vars(core_ops) if not n.startswith("__") and n != "annotations"]
    assert names
    for n in names:
        assert any(getattr(m, n, None) is getattr(core_ops, n) for m in homes), n


def test_an_unknown_name_of_values_is_an_attribute_error():
    with pytest.raises(AttributeError):
        values.no_such_name  # noqa: B018


def test_a_record_and_a_dictionary_repr_as_they_print():
    r = Record({"a": 1.0, "b": np.array([1.0, 2.0])})
    assert repr(r) == format_value(r) == "{a = 1, b = [1, 2]}"
    d = Dict({"k": 2.0})
    assert repr(d) == format_value(d)


def test_primitive_options_past_fwd_are_keywords():
    with pytest.raises(TypeError):
        Primitive("p", lambda x: x, None, None, 1)
    assert Primitive("p", lambda x: x).nondiff       # no VJP: not differentiable
