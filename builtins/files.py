"""File helpers shared by the IO builtins: resolving a path, refusing what is not a regular
file, reading at most the string limit, and writing atomically."""
from __future__ import annotations

import os

from tapeml.errors import IOErr


def resolve_path(interp, path: str) -> str:
    """A relative path is taken from the running script's directory (like import); in -c and
    the REPL that is the current directory."""
    if os.path.isabs(path):
        return path
    base = interp.dir_stack[-1] if getattr(interp, "dir_stack", None) else os.getcwd()
    return os.path.join(base, path)


def read_limited(f, fname: str, full: str) -> bytes:
    """The bytes of an open file, refused before reading when it is past the string limit
    (lang/limits.py), and never more than the limit read even if the file grows meanwhile."""
    from tapeml import limits
    size = os.fstat(f.fileno()).st_size
    data = b""
    if size <= limits.MAX_STRING_BYTES:
        data = f.read(limits.MAX_STRING_BYTES + 1)
        size = len(data)
    limits.check_string_bytes(f"{fname}(): the text of {full}", size)
    return data


def atomic_write(fname: str, full: str, write, binary: bool) -> None:
    """Write a file through a temporary file in the same directory, then rename it over `full`
    (os.replace): a crash or kill never leaves a half-written file. `write(f)` fills the file."""
    import tempfile
    directory = os.path.dirname(os.path.abspath(full))
    if not os.path.isdir(directory):
        raise IOErr(f"{fname}(): the directory {directory} does not exist")
    if os.path.isdir(full):
        raise IOErr(f"{fname}(): {full} is a directory")
    if os.path.lexists(full) and not os.path.isfile(full):
        # the rename would put a regular file in place of a device (/dev/null), a pipe or a socket
        raise IOErr(f"{fname}(): {full} is not a regular file (it is a device, a pipe or a socket); "
                    f"only regular files are written")
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(full) + ".", suffix=".tmp", dir=directory)
    except OSError as e:
        raise IOErr(f"{fname}(): cannot write in {directory}: {e.strerror}") from None
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, full)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise IOErr(f"{fname}(): cannot write {full}: {e.strerror or e}") from None
        raise


def existing_file(fname: str, full: str, what: str) -> str:
    """`full` when it names a file; an IOError naming the resolved path otherwise."""
    if not os.path.exists(full):
        raise IOErr(f"{fname}(): no file at {full}")
    if os.path.isdir(full):
        raise IOErr(f"{fname}(): {full} is a directory, not {what}")
    if not os.path.isfile(full):        # /dev/zero, a pipe, a socket: no end, or no size to check
        raise IOErr(f"{fname}(): {full} is not a regular file (it is a device, a pipe or a socket)")
    return full
