"""Statistics & ML, split by job: schema (validators), activations, layers (norms, dense,
dropout), attention, blocks, init, losses (embedding, cross_entropy), params (param_count,
summary). Importing the package registers its builtins."""
from tapeml.builtins.ml import activations, layers, attention, blocks, init, losses, params, functional  # noqa: F401
