"""tapeml's builtins: one module per doc category (registry.CATEGORIES), so a builtin's file
follows from its category: Core -> core.py (help -> help.py, the help system), Math -> math.py,
Arrays -> the arrays/ package and Statistics & ML -> the ml/ package (each split by job), Autodiff -> autodiff.py,
Random -> random.py, Plotting -> plot.py, IO -> io.py, Linear algebra -> linalg.py, Strings &
collections -> strings.py, Reductions & sorting -> reductions.py, Distributed -> distributed.py. Importing this package registers them all."""
from tapeml.builtins.registry import REGISTRY, Builtin, builtin  # noqa: F401
from tapeml.builtins import core, math, arrays, ml, autodiff  # noqa: F401  (registration)
from tapeml.builtins import plot  # noqa: F401  (registration: the Plotting category)
from tapeml.builtins import random  # noqa: F401  (registration: seed, rand, randn, randint, sample)
from tapeml.builtins import help  # noqa: F401  (registration: help, and help_text for the REPL)
from tapeml.builtins import io  # noqa: F401  (registration: read_text, write_text, save, load)
from tapeml.builtins import linalg  # noqa: F401  (registration: the Linear algebra category)
from tapeml.builtins import strings  # noqa: F401  (registration: the Strings & collections category)
from tapeml.builtins import reductions  # noqa: F401  (registration: the Reductions & sorting category)
from tapeml.builtins import distributed  # noqa: F401  (registration: world_size, rank, all_reduce, broadcast, shard)
