"""tapeml: a small interpreted matrix language for building, differentiating and training
transformer pieces by hand.

From Python (docs/python.md):

    import tapeml
    s = tapeml.Session(dtype="float64", seed=0)
    s["x"] = numpy_array
    s.run("y = softmax(x)")
    s["y"]                      # a NumPy array

`tapeml.Session`, `tapeml.LangError` and `tapeml.Dict` (a tapeml dictionary on the Python side)
are imported on first use, so `import tapeml` (and the
command line's start-up) stays as light as it was.
"""
__version__ = "0.1.0"
__all__ = ["Session", "LangError", "Dict", "__version__"]


def __getattr__(name):
    if name == "Session":
        from tapeml.session.session import Session
        return Session
    if name == "LangError":
        from tapeml.syntax.errors import LangError
        return LangError
    if name == "Dict":
        from tapeml.session.session import Dict
        return Dict
    raise AttributeError(f"module 'tapeml' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"Session", "LangError", "Dict"})
