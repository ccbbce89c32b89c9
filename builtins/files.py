"""File helpers shared by the IO builtins: resolving a path, refusing what is not a regular
file, reading at most the string limit, and the one writer (`atomic_write`) behind save,
write_text, write_csv, write_json and savefig.

The writer, in the order it works (WRITER_HOW says the same for the docs):
- a symbolic link is followed to its target, through a chain of links (a dangling link: its
  target is created when the target's directory exists, as the shell's `>` does); a loop of
  links, a directory, a device, a pipe or a socket is an IOError;
- a file that exists but cannot be written (read-only for this user) is refused, as `>` refuses
  it: the writer never replaces what it could not write in place;
- the new content goes to a temporary file in the target's directory, named
  `.tapeml-<tag>-<host>-<pid>-<random>.tmp` (at most ~45 bytes, whatever the target's name: a
  255-byte name can be written); it is written fully and fsynced;
- then it replaces the target with os.replace (atomic: readers see the old file or the new one)
  and the directory is fsynced, keeping the old file's mode and its owner and group (chown, when
  this user may); a new file gets mode 0666 minus the umask, as `>` gives it;
- when replacing would lose something, the content is instead copied into the existing file
  (its inode kept, not atomic: a crash during the copy leaves it partly written): when the file
  has more than one hard link (they keep seeing one file, as with `>`, numpy.save or torch.save;
  vim's `backupcopy=auto` decides the same way), when its owner or group cannot be given to a
  new file, or when its directory cannot be written;
- the temporary file is removed whatever stops the write (an error, Ctrl-C, SIGTERM: the
  command line turns SIGTERM into an unwinding exception); one left by a killed writer
  (SIGKILL, a power cut) is removed by the first write of the same file in a later run (a
  process) on the same machine, once the killed process is gone.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import zlib

from tapeml.array import context as _context
from tapeml.syntax.errors import IOErr

_context.slot("written_notes", set)      # the files a note already named, per session (note_written)

# The shared paragraph of every writer's documentation (save, write_text, write_csv,
# write_json, savefig): one text, so the pages cannot drift apart.
WRITER_HOW = (
    "The file is written as every tapeml writer writes (save, write_text, write_csv, write_json, "
    "savefig): to a temporary file in the same directory, then renamed over path with os.replace, "
    "so a crash or kill leaves the old file or the new one, never half of one; the file and its "
    "directory are fsynced. A symbolic link is followed to its target (a dangling link's target is "
    "created, as the shell's `>` does). An existing file keeps its mode and owner; a new one gets "
    "mode 0666 minus the umask. A file with several hard links, or one whose owner could not be "
    "kept, is written in place instead (its links kept, as with `>`; not atomic). A read-only file "
    "is refused, as `>` refuses it. A temporary file left by a killed run is removed by the next "
    "run that writes the same file. A relative path starts at the script's folder: run from another "
    "folder, the writer names the file it wrote in a note on standard error, once per file "
    "(\"note: save() wrote examples/ckpt.npz: ...\"; notes(false) silences it).")
WRITER_ERRORS = ("IOError when the directory does not exist or cannot be written, or path is a read-only "
                 "file (permission denied), a directory, a device, a pipe, a socket or a loop of links")


def resolve_path(ctx, path: str) -> str:
    """A relative path is taken from the running script's directory (like import); in -c and
    the REPL that is the current directory."""
    if os.path.isabs(path):
        return path
    return os.path.join(ctx.directory, path)


def shown_path(full: str) -> str:
    """A path written as a message names it: relative to the current directory when the file is
    under it (examples/loss.png for a script in examples/ run from the repository), else absolute:
    the file the user will look for, wherever the script's relative path started."""
    full = os.path.abspath(full)
    here = os.getcwd()
    return os.path.relpath(full, here) if full.startswith(os.path.join(here, "")) else full


def _written_notes() -> set:
    """This session's files already named by note_written (a session slot)."""
    from tapeml.array import context
    return context.LIVE["written_notes"]


def note_written(ctx, fname: str, path: str, full: str, span=None) -> None:
    """After a writer wrote `full` for the relative `path` of a script in another folder than the
    current directory (tapeml examples/train.ml writes examples/ckpt.npz for "ckpt.npz"): a note
    on standard error, once per file and session, naming where the file is. A writer in a loop
    says it once; notes(false) or TAPEML_NOTES=0 silences it, as every note."""
    import sys
    from tapeml.array import context
    if os.path.isabs(path) or os.path.abspath(path) == os.path.abspath(full) or not context.LIVE["notes"]:
        return
    seen = _written_notes()
    if full in seen:
        return
    seen.add(full)
    span = span or ctx.span         # (a builtin that called f since it began gives its own call's)
    where = f"{span}: " if span is not None else ""
    sys.stderr.write(f"{where}note: {fname}() wrote {shown_path(full)}: a script's relative path starts at the "
                     f"script's folder ({shown_path(ctx.directory) or '.'}), not the current directory; "
                     f"notes(false) turns these notes off\n")


def read_limited(f, fname: str, full: str) -> bytes:
    """The bytes of an open file, refused before reading when it is past the string limit
    (lang/array/limits.py), and never more than the limit read even if the file grows meanwhile."""
    from tapeml.array import limits
    size = os.fstat(f.fileno()).st_size
    data = b""
    if size <= limits.MAX_STRING_BYTES:
        data = f.read(size + 1)         # read(limit) would allocate the whole limit (0.1 GB) first
        if len(data) > size:            # the file grew meanwhile: the rest, up to the limit
            data += f.read(limits.MAX_STRING_BYTES + 1 - len(data))
        size = len(data)
    limits.check_string_bytes(f"{fname}(): the text of {full}", size)
    return data


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


MAX_LINKS = 40          # links followed in a chain, as Linux follows (ELOOP)


def _chase(full: str):
    """(where a chain of symbolic links from `full` ends, None), or (None, why it ends nowhere:
    'a loop of symbolic links (a -> b -> a)', 'a chain of more than 40 symbolic links')."""
    path, seen = full, []
    for _ in range(MAX_LINKS):
        try:
            link = os.readlink(path)
        except OSError:         # not a link, or nothing there
            return path, None
        seen.append(os.path.normpath(path))
        path = os.path.join(os.path.dirname(path), link)
        if os.path.normpath(path) in seen:
            cycle = seen[seen.index(os.path.normpath(path)):] + [os.path.normpath(path)]
            here = os.path.dirname(os.path.abspath(full))       # the links named from full's folder
            return None, f"a loop of symbolic links ({' -> '.join(os.path.relpath(c, here) for c in cycle)})"
    return None, f"a chain of more than {MAX_LINKS} symbolic links"


def follow_links(fname: str, full: str) -> str:
    """The file a chain of symbolic links ends at (`full` itself when it is no link); the last
    one may not exist (a dangling link). A loop is an IOError."""
    end, why = _chase(full)
    if end is None:
        raise IOErr(f"{fname}(): {full} is {why}")
    return end


def link_trouble(full: str) -> str | None:
    """Why the path `full`, which names no file, is a link that leads to none: 'it is a loop of
    symbolic links (...)', 'it is a link to T, which does not exist'; None when it is no link.
    Every reader says it (import, the command line, load, read_*)."""
    if not os.path.islink(full):
        return None
    end, why = _chase(full)
    return f"it is {why}" if end is None else f"it is a link to {end}, which does not exist"


def _shown(full: str, target: str) -> str:
    """The path as given, and where its links lead when they lead elsewhere."""
    return full if target == os.path.abspath(full) else f"{full} (a link to {target})"


def _reason(e: OSError) -> str:
    """An OSError's reason in lower case: 'permission denied', 'no space left on device'."""
    text = e.strerror or str(e)
    return text[:1].lower() + text[1:]


def existing_file(fname: str, full: str, what: str) -> str:
    """`full` when it names a file; an IOError naming the resolved path otherwise."""
    if not os.path.exists(full):
        trouble = link_trouble(full)
        raise IOErr(f"{fname}(): no file at {full}" + (f": {trouble}" if trouble else ""))
    if os.path.isdir(full):
        raise IOErr(f"{fname}(): {full} is a directory, not {what}")
    if not os.path.isfile(full):        # /dev/zero, a pipe, a socket: no end, or no size to check
        raise IOErr(f"{fname}(): {full} is not a regular file (it is {file_kind(os.stat(full).st_mode)})")
    return full


# ---- the one writer -------------------------------------------------------------------------------
_TEMP = re.compile(r"\.tapeml-([0-9a-f]{8})-([0-9a-f]{4})-([0-9]{1,10})-[0-9a-f]{8}\.tmp\Z")


def _tag(base: str) -> str:
    """8 hex digits that tie a temporary file to its target's name."""
    return f"{zlib.crc32(os.fsencode(base)):08x}"


def _host() -> str:
    """4 hex digits naming this machine (a shared directory may be written from several)."""
    return f"{zlib.crc32(os.fsencode(os.uname().nodename if hasattr(os, 'uname') else '')) & 0xFFFF:04x}"


def _temp_path(directory: str, base: str) -> str:
    """A temporary file's name for the target `base`: short whatever `base` is, and recognisable
    as a temporary of that target (the tag), written by this process on this machine."""
    return os.path.join(directory, f".tapeml-{_tag(base)}-{_host()}-{os.getpid()}-{os.urandom(4).hex()}.tmp")


def _process_start(pid: int):
    """When process `pid` started (seconds since the epoch), None when unknown (not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def _writer_alive(pid: int, mtime: float) -> bool:
    """Whether the process that wrote a temporary file last modified at `mtime` still runs
    (a process of that pid that started later is another one: pids are reused)."""
    if pid <= 0 or pid == os.getpid() or os.name != "posix":
        return pid > 0          # this process's own (another write in progress), or no way to ask
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        pass                    # another user's process (alive), or a pid past the range
    start = _process_start(pid)
    return start is None or start <= mtime + 1.0


_SWEPT: set = set()      # (directory, name) already cleaned by this process


def _remove_stale_temps(directory: str, base: str) -> None:
    """Remove the temporary files of target `base` whose writer on this machine is gone
    (killed with SIGKILL, or the machine lost power), so they do not pile up. Once per target
    and process: a write in a loop does not list a large directory each time."""
    if (directory, base) in _SWEPT:
        return
    _SWEPT.add((directory, base))
    prefix = f".tapeml-{_tag(base)}-{_host()}-"
    try:
        with os.scandir(directory) as entries:
            stale = [e for e in entries if e.name.startswith(prefix) and _TEMP.match(e.name)]
    except OSError:
        return
    for e in stale:
        try:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and not _writer_alive(int(_TEMP.match(e.name).group(3)), st.st_mtime):
                os.unlink(e.path)
        except OSError:
            pass


def _check_target(fname: str, full: str, target: str):
    """The target's stat (None when it does not exist yet), or the IOError that refuses it."""
    directory = os.path.dirname(target) or "."
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:        # a component that is a file, a name too long, no permission to look
        raise IOErr(f"{fname}(): cannot write {_shown(full, target)}: {_reason(e)}") from None
    if st is None:
        if not os.path.isdir(directory):
            if target != os.path.abspath(full):
                raise IOErr(f"{fname}(): {full} is a link to {target}, whose directory {directory} "
                            f"does not exist")
            raise IOErr(f"{fname}(): the directory {directory} does not exist")
        return None
    if stat.S_ISDIR(st.st_mode):
        raise IOErr(f"{fname}(): {_shown(full, target)} is a directory")
    if not stat.S_ISREG(st.st_mode):
        # the rename would put a regular file in place of a device (/dev/null), a pipe or a socket
        raise IOErr(f"{fname}(): {_shown(full, target)} is not a regular file (it is "
                    f"{file_kind(st.st_mode)}); only regular files are written")
    eff = os.access in os.supports_effective_ids
    if not (os.access(target, os.W_OK, effective_ids=True) if eff else os.access(target, os.W_OK)):
        raise IOErr(f"{fname}(): cannot write {_shown(full, target)}: permission denied (the file is "
                    f"read-only: {stat.filemode(st.st_mode)})")
    return st


def _keep_owner_and_mode(fd: int, st) -> bool:
    """Give the temporary file `fd` the old file's owner, group and mode; False when the owner
    or group cannot be given (then the old file is written in place instead)."""
    kept = True
    if hasattr(os, "fchown"):
        now = os.fstat(fd)
        if (now.st_uid, now.st_gid) != (st.st_uid, st.st_gid):
            try:
                os.fchown(fd, st.st_uid, st.st_gid)
            except OSError:
                kept = False
    if hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))      # after chown, which clears set-id bits
    return kept


def _fsync_directory(directory: str) -> None:
    """Make a rename in `directory` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _copy_into(staged, target: str) -> None:
    """Write the staged content into the existing file `target` (same inode: its hard links,
    owner and mode stay), then fsync it."""
    staged.seek(0)
    fd = os.open(target, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(staged, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())


def _stage(fname: str, full: str, directory: str, base: str, st, names: list):
    """An open binary file for the new content: a new temporary file in the target's directory
    (its name is put in `names` before it is created, so the caller always knows what to
    remove), or, when only the target itself can be written (a read-only directory), an unnamed
    one in the system's temporary directory, to be copied in place."""
    for _ in range(100):
        names[:] = [_temp_path(directory, base)]
        try:
            fd = os.open(names[0], os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                         0o600 if st is not None else 0o666)      # a new file: 0666 minus the umask
            return os.fdopen(fd, "w+b")
        except FileExistsError:
            names[:] = []
        except PermissionError:
            names[:] = []
            if st is None:
                raise IOErr(f"{fname}(): cannot write {_shown(full, os.path.join(directory, base))}: "
                            f"permission denied (the directory {directory} cannot be written)") from None
            return tempfile.TemporaryFile()
    raise IOErr(f"{fname}(): cannot write in {directory}: no free temporary name")


def atomic_write(fname: str, full: str, write, binary: bool) -> None:
    """Write the file `full` with `write(f)` (f a binary or UTF-8 text file), as the module
    docstring says: through a temporary file renamed over the link-resolved target."""
    import io
    target = follow_links(fname, os.path.abspath(full))
    st = _check_target(fname, full, target)
    directory = os.path.dirname(target) or "."
    base = os.path.basename(target)
    names: list = []        # the temporary file, named before it exists: `finally` removes it
    try:
        _remove_stale_temps(directory, base)
        with _stage(fname, full, directory, base, st, names) as staged:
            in_place = st is not None and (not names or st.st_nlink > 1)
            if st is not None and not in_place and not _keep_owner_and_mode(staged.fileno(), st):
                in_place = True
            if binary:
                write(staged)
            else:
                text = io.TextIOWrapper(staged, encoding="utf-8", newline="")
                write(text)
                text.flush()
                text.detach()
            staged.flush()
            os.fsync(staged.fileno())
            if in_place:
                _copy_into(staged, target)
        if not in_place:
            os.replace(names[0], target)
            names.clear()
            _fsync_directory(directory)
    except OSError as e:
        raise IOErr(f"{fname}(): cannot write {_shown(full, target)}: {_reason(e)}") from None
    finally:
        for name in names:
            try:
                os.unlink(name)
            except OSError:
                pass
