"""The evaluator: the interpreter and its parts (statements, calls, indexing), scopes, progress bars
and the deep-stack thread of deep recursions."""
