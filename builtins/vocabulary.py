"""The parameters several builtins share, declared once (DESIGN.md rule 8): the same name, kind,
default and documentation wherever they appear, so the pages, help and the binder agree."""
from tapeml.builtins.registry import P

X = P("x", "array", doc="a number or a matrix of any shape", shape="any")
# x of a reduction: also a tuple of numbers (what map returns), reduced as the vector of its items
XS = P("x", "numbers", doc="a number, a matrix of any shape, or a tuple of numbers (as map returns them: "
                           "the vector of its items)", shape="any")
DIM = P("dim", "int", None, doc="the axis to reduce (negative counts from the end); none: all elements")
KEEPDIMS = P("keepdims", "bool", False, doc="keep the reduced axis with size 1, so the result broadcasts against x "
                                          "(NumPy's keepdims, PyTorch's keepdim)")
DIMS = P("dims", variadic=True, doc="sizes of each axis (whole numbers), one by one or as one tuple (size(y)); "
                                    "none gives a single number")
