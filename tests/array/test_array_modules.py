"""The array layer's modules after issue 39's split (core_ops.py by family, values.py into values,
number_text, printer and display): the moved names have
one home each, and a record's repr is still its printed form."""
import importlib

import numpy as np
import pytest

from tapeml.array import values
from tapeml.array.printer import format_value
from tapeml.array.tape import Primitive
from tapeml.array.values import Dict, Record


def test_the_old_homes_are_gone():
    """core_ops.py and values' moved names have no second way in: one home each."""
    with pytest.raises(ImportError):
        importlib.import_module("tapeml.array.core_ops")
    for name in ("format_value", "display_value", "format_gb"):
        assert not hasattr(values, name), name


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
