"""Arrays, split by job: make (zeros, ones, fill, the _like pair, eye, range, linspace, unique),
shapes (reshape, transpose, joins, triangles, squeeze and friends, permute, flip, tile, repeat,
pad, chunk, roll) and along (take_along, put_along, add_along: the pairs, not the grid).
Importing the package registers its builtins."""
from tapeml.builtins.arrays import make, shapes, along  # noqa: F401
