"""The faces: the ways a person meets the language (command line, REPL with its highlighting,
Jupyter kernel, docs builder). Each drives the layers below; nothing below imports a face."""
