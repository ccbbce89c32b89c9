"""The builtins, one module per doc category; importing this package registers them all."""
from tapeml.builtins.registry import REGISTRY, Builtin, builtin  # noqa: F401
from tapeml.builtins import core, math, arrays, nn, autodiff  # noqa: F401  (registration)
from tapeml.builtins import plot  # noqa: F401  (registration: the Plotting category)
from tapeml.builtins import random  # noqa: F401  (registration: seed, rand, randn, randint)
from tapeml.builtins import help  # noqa: F401  (registration: help, and help_text for the REPL)
from tapeml.builtins import train, io  # noqa: F401  (registration: embedding, cross_entropy, save, load, ...)
from tapeml.builtins import progress  # noqa: F401  (registration: progress, progress_note)
from tapeml.builtins import linalg  # noqa: F401  (registration: the Linear algebra category)
from tapeml.builtins import strings  # noqa: F401  (registration: the Strings & collections category)
