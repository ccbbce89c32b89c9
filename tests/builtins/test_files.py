"""Issue 25, files: the one writer (save, .safetensors, write_text, write_csv, write_json, savefig)
against the shell's `>` as the reference (links, hard links, modes, owners, umask, read-only
files), long names, temporary files after SIGTERM and SIGKILL, and the loaders' guards (a zip
bomb, the nesting depth)."""
from __future__ import annotations

import io
import os
import random
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import numpy as np
import pytest

from conftest import run_slow, slow_after
from support import TAPEML, allocates_at_most, error_of, output_of, run, run_cli, variables_after
from tapeml.array import limits
from tapeml.syntax.errors import IOErr, LangError, ValueErr
from tapeml.array.number_text import format_gb
from tapeml.array.values import Record

ROOT = os.geteuid() == 0
NOBODY = 65534


def _npz(path):
    with np.load(path, allow_pickle=False) as d:
        return tuple((k, d[k].tobytes()) for k in d.files)


def _raw(path):
    with open(path, "rb") as f:
        return f.read()


# writer -> (extension, call writing the file p, reader giving the content to compare). A .npz
# holds the time of writing in its zip headers, so it is compared by its arrays.
WRITERS = {
    "write_text": (".txt", 'write_text(p, "new text\\n")', _raw),
    "write_csv": (".csv", "write_csv(p, [1, 2; 3, 4.5])", _raw),
    "write_json": (".json", "write_json(p, {a = [1, 2], b = \"x\"})", _raw),
    "save": (".npz", "save(p, {w = [1, 2, 3], b = 0.5})", _npz),
    "save_safetensors": (".safetensors", "save(p, {w = [1, 2, 3], b = 0.5})", _raw),
    "savefig": (".png", "plot([1, 3, 2])\nsavefig(p)", _raw),
}


def write(writer: str, path) -> None:
    from tapeml.builtins import plot
    plot.close_all()                            # each figure drawn anew: the same bytes each time
    try:
        run(WRITERS[writer][1], p=str(path))
    finally:
        plot.close_all()


# ---- the shell's `>` is the reference -----------------------------------------------------------
def _case(d, case: str, ext: str) -> None:
    """Build the files of one case in directory d; the name written is always f<ext>."""
    f, real = d / f"f{ext}", d / f"real{ext}"
    if case == "plain":
        f.write_bytes(b"old")
        f.chmod(0o644)
    elif case == "private":
        f.write_bytes(b"old")
        f.chmod(0o600)
    elif case == "executable":
        f.write_bytes(b"old")
        f.chmod(0o755)
    elif case == "link":
        real.write_bytes(b"old")
        real.chmod(0o640)
        f.symlink_to(real.name)
    elif case == "chain":                       # f -> l2 -> sub/real (relative links)
        (d / "sub").mkdir()
        (d / "sub" / f"real{ext}").write_bytes(b"old")
        (d / "l2").symlink_to(f"sub/real{ext}")
        f.symlink_to("l2")
    elif case == "absolute link":
        real.write_bytes(b"old")
        f.symlink_to(str(real))
    elif case == "dangling":
        f.symlink_to(f"missing{ext}")
    elif case == "hard link":
        f.write_bytes(b"old")
        f.chmod(0o604)
        os.link(f, d / "g")
    elif case == "hard link through a symlink":
        real.write_bytes(b"old")
        os.link(real, d / "g")
        f.symlink_to(real.name)
    elif case == "other owner":                 # root only: a file of another user and group
        f.write_bytes(b"old")
        f.chmod(0o664)
        os.chown(f, NOBODY, NOBODY)
    elif case == "read-only":                   # root writes it, as the shell does
        f.write_bytes(b"old")
        f.chmod(0o444)
    elif case != "new":
        raise ValueError(case)


def _snapshot(d, reader) -> list:
    """Each entry of d (recursively): its kind, link target, mode, owner, the names sharing its
    inode, and its content (through `reader` for the files that are not 'old')."""
    inodes: dict = {}
    for root, dirs, files in os.walk(d):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                inodes.setdefault(os.stat(p).st_ino, []).append(os.path.relpath(p, d))
    out = []
    for root, dirs, files in os.walk(d):
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            rel = os.path.relpath(p, d)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out.append((rel, "link", os.readlink(p).replace(str(d), "<dir>")))
            elif stat.S_ISDIR(st.st_mode):
                out.append((rel, "dir"))
            else:
                content = _raw(p)
                out.append((rel, "file", stat.filemode(st.st_mode), st.st_uid, st.st_gid,
                            sorted(inodes[st.st_ino]), "old" if content == b"old" else reader(p)))
    return sorted(out)


CASES = ["new", "plain", "private", "executable", "link", "chain", "absolute link", "dangling", "hard link",
         "hard link through a symlink", "read-only", "other owner"]


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("case", CASES)
def test_every_writer_leaves_the_files_as_the_shells_redirection_does(tmp_path, writer, case):
    """The shell writes the same bytes with `cat new > f`; then both directories must hold the
    same entries: links kept and written through, hard links kept, modes, owners and umask as `>`."""
    if case in ("other owner", "read-only") and not ROOT:
        pytest.skip("needs root (a file of another user; a read-only file root may write)")
    ext, _, reader = WRITERS[writer]
    (tmp_path / "ref").mkdir()
    new = tmp_path / "ref" / f"new{ext}"
    write(writer, new)                          # the bytes the shell will write
    shell, ours = tmp_path / "shell", tmp_path / "ours"
    for d in (shell, ours):
        d.mkdir()
        _case(d, case, ext)
    old = os.umask(0o027)
    try:
        subprocess.run(["sh", "-c", f'cat "{new}" > "f{ext}"'], cwd=shell, check=True)
        write(writer, ours / f"f{ext}")
    finally:
        os.umask(old)
    want = _snapshot(shell, reader)
    assert _snapshot(ours, reader) == want
    assert any(entry[-1] not in ("old",) and entry[1] == "file" for entry in want)    # something was written


@pytest.mark.parametrize("mask", slow_after(1, [0o022, 0o077, 0o002]))
def test_a_new_file_gets_0666_minus_the_umask_in_a_subprocess(tmp_path, mask):
    """Every writer, run by the command line under a umask, makes files as `: > f` does there."""
    script = "\n".join(f'p = "{w}{WRITERS[w][0]}"\n{WRITERS[w][1]}' for w in sorted(WRITERS))
    subprocess.run(TAPEML + ["-c", script], cwd=tmp_path, check=True, timeout=120,
                   preexec_fn=lambda: os.umask(mask))
    subprocess.run(["sh", "-c", f"umask {mask:03o}; : > shell"], cwd=tmp_path, check=True)
    want = stat.S_IMODE(os.stat(tmp_path / "shell").st_mode)
    assert want == 0o666 & ~mask
    for w in WRITERS:
        assert stat.S_IMODE(os.stat(tmp_path / f"{w}{WRITERS[w][0]}").st_mode) == want, w
    assert sorted(os.listdir(tmp_path)) == sorted(["shell"] + [f"{w}{WRITERS[w][0]}" for w in WRITERS])


# ---- as another user: read-only files, owners that cannot be given --------------------------------
def _as_other_user(fn) -> str:
    """fn()'s result (a string, or the error's kind and message) run in a forked child: as the
    user nobody when the tests run as root (so permissions count), as this user otherwise."""
    from tapeml.array import backend
    backend.current()        # TAPEML_DEVICE's backend made here: nobody may not read the venv to import torch
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                # the child: never returns into pytest
        try:
            os.close(r)
            if ROOT:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            out = str(fn())
        except LangError as e:
            out = f"{type(e).__name__}: {e.message}"
        except BaseException as e:              # noqa: BLE001 - reported to the test
            out = f"python {type(e).__name__}: {e}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode()


@pytest.fixture
def shared_dir():
    """A directory the other user can write (pytest's tmp_path is private to root)."""
    d = tempfile.mkdtemp(prefix="tapeml-files-")
    os.chmod(d, 0o755)
    if ROOT:
        os.chown(d, NOBODY, NOBODY)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_read_only_file_is_refused_as_the_shell_refuses_it(shared_dir, writer):
    ext = WRITERS[writer][0]
    with tempfile.TemporaryDirectory() as warm:         # the writer's modules load here, not in the
        write(writer, os.path.join(warm, f"w{ext}"))    # child (which may not read this Python's files)
    path = os.path.join(shared_dir, f"ro{ext}")
    with open(path, "wb") as f:
        f.write(b"keep")
    os.chmod(path, 0o444)
    if ROOT:
        os.chown(path, NOBODY, NOBODY)
    shell = _as_other_user(lambda: subprocess.run(["sh", "-c", f'echo x > "{path}"'], capture_output=True,
                                                  text=True).stderr)
    assert "Permission denied" in shell                  # the reference: the shell refuses it
    got = _as_other_user(lambda: write(writer, path))
    fname = "save" if writer.startswith("save_") else writer
    assert got == f"IOErr: {fname}(): cannot write {path}: permission denied (the file is read-only: -r--r--r--)"
    assert _raw(path) == b"keep" and sorted(os.listdir(shared_dir)) == [f"ro{ext}"]     # no temporary file
    link = os.path.join(shared_dir, f"link{ext}")
    os.symlink(path, link)                              # through a link: both names in the message
    got = _as_other_user(lambda: write(writer, link))
    assert got == (f"IOErr: {fname}(): cannot write {link} (a link to {path}): permission denied "
                   f"(the file is read-only: -r--r--r--)")


def test_a_new_file_in_a_read_only_directory_is_refused_and_a_writable_file_there_is_written_in_place(shared_dir):
    ro = os.path.join(shared_dir, "ro")
    os.mkdir(ro)
    with open(os.path.join(ro, "w.txt"), "w") as f:
        f.write("old")
    os.chmod(os.path.join(ro, "w.txt"), 0o666)          # a file anyone may write ...
    os.chmod(ro, 0o555)                                 # ... in a directory nobody may write
    if ROOT:
        os.chown(ro, NOBODY, NOBODY)
    try:
        got = _as_other_user(lambda: output_of(f'write_text("{ro}/new.txt", "x")'))
        assert got == (f"IOErr: write_text(): cannot write {ro}/new.txt: permission denied (the directory "
                       f"{ro} cannot be written)")
        got = _as_other_user(lambda: output_of(f'write_text("{ro}/w.txt", "new")\nprint(read_text("{ro}/w.txt"))'))
        assert got == "new\n"                           # as `echo new > w.txt` would
        assert sorted(os.listdir(ro)) == ["w.txt"]
    finally:
        os.chmod(ro, 0o755)


@pytest.mark.skipif(not ROOT, reason="needs root to make a file of another user")
def test_a_file_whose_owner_cannot_be_kept_is_written_in_place(shared_dir):
    """nobody may write root's 0666 file but not give a new file root's name: written in place,
    root keeps it, as with `>`."""
    path = os.path.join(shared_dir, "shared.csv")
    with open(path, "w") as f:
        f.write("old")
    os.chmod(path, 0o666)
    source = f'write_csv("{path}", [1, 2; 3, 4])\nprint(all(read_csv("{path}") == [1, 2; 3, 4]))'
    got = _as_other_user(lambda: output_of(source))
    assert got == "true\n"
    st = os.stat(path)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o666)
    assert np.array_equal(np.loadtxt(path, delimiter=","), [[1, 2], [3, 4]])
    assert os.listdir(shared_dir) == ["shared.csv"]


# ---- names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("nbytes", [246, 250, 255])
def test_a_name_of_up_to_255_bytes_is_written(tmp_path, writer, nbytes):
    ext, _, reader = WRITERS[writer]
    name = "é" * ((nbytes - len(ext)) // 2) + "a" * ((nbytes - len(ext)) % 2) + ext
    assert len(name.encode()) == nbytes
    write(writer, tmp_path / name)
    short = tmp_path / f"short{ext}"
    write(writer, short)
    assert reader(tmp_path / name) == reader(short)
    write(writer, tmp_path / name)                        # again, over the existing file
    assert sorted(os.listdir(tmp_path)) == sorted([name, short.name])


def test_links_are_followed_and_their_errors_name_both_paths(tmp_path):
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    err = error_of("save(p, {w = 1})", p=str(tmp_path / "loop1"))
    assert isinstance(err, IOErr) and err.message == \
        f"save(): {tmp_path / 'loop1'} is a loop of symbolic links (loop1 -> loop2 -> loop1)"
    (tmp_path / "far.npz").symlink_to("no/such/dir/x.npz")
    err = error_of("save(p, {w = 1})", p=str(tmp_path / "far.npz"))
    assert err.message == (f"save(): {tmp_path / 'far.npz'} is a link to {tmp_path / 'no/such/dir/x.npz'}, "
                           f"whose directory {tmp_path / 'no/such/dir'} does not exist")
    err = error_of("load(p)", p=str(tmp_path / "far.npz"))
    assert err.message == (f"load(): no file at {tmp_path / 'far.npz'}: it is a link to "
                           f"{tmp_path / 'no/such/dir/x.npz'}, which does not exist")
    (tmp_path / "null.txt").symlink_to("/dev/null")
    err = error_of('write_text(p, "x")', p=str(tmp_path / "null.txt"))
    assert err.message == (f"write_text(): {tmp_path / 'null.txt'} (a link to /dev/null) is not a regular file "
                           f"(it is a device); only regular files are written")
    (tmp_path / "d").mkdir()
    (tmp_path / "dl").symlink_to("d")
    err = error_of('write_text(p, "x")', p=str(tmp_path / "dl"))
    assert err.message == f"write_text(): {tmp_path / 'dl'} (a link to {tmp_path / 'd'}) is a directory"
    assert os.readlink(tmp_path / "dl") == "d" and os.listdir(tmp_path / "d") == []
    # the case: save to a dangling link whose directory exists creates the target
    (tmp_path / "ck.npz").symlink_to("runs_ck.npz")
    run("save(p, {w = [1, 2]})", p=str(tmp_path / "ck.npz"))
    assert os.readlink(tmp_path / "ck.npz") == "runs_ck.npz"
    assert _npz(tmp_path / "runs_ck.npz") == (("w", np.array([1.0, 2.0]).tobytes()),)


# ---- temporary files ------------------------------------------------------------------------------
def _temps(d) -> list:
    return sorted(n for n in os.listdir(d) if n.endswith(".tmp"))


def test_sigterm_during_write_csv_never_leaves_a_temporary_file(tmp_path):
    """24 runs (4 at a time; 4 in one round without --slow) stopped with SIGTERM at random moments
    of a write_csv loop: each exits with 143, leaves no temporary file, and the file it leaves (if
    any) is a whole table."""
    rng = random.Random(25)
    dirs = [tmp_path / f"run{i}" for i in range(4)]
    for d in dirs:
        d.mkdir()
        (d / "loop.ml").write_text('x = rand(2000, 10)\nprint("ready")\nwhile true\n    write_csv("t.csv", x)\nend\n',
                                   encoding="utf-8")
    for _ in range(6 if run_slow() else 1):
        procs = [subprocess.Popen(TAPEML + [str(d / "loop.ml")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, cwd=d) for d in dirs]
        try:
            for proc in procs:
                assert proc.stdout.readline() == "ready\n"
            for proc in procs:
                time.sleep(rng.uniform(0, 0.1))
                proc.send_signal(signal.SIGTERM)
            errs = [proc.communicate(timeout=60)[1] for proc in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        for d, proc, err in zip(dirs, procs, errs):
            assert proc.returncode == 143 and err.splitlines() == ["Terminated (SIGTERM)"], err
            assert set(os.listdir(d)) <= {"loop.ml", "t.csv"}, os.listdir(d)
            if (d / "t.csv").exists():
                assert np.loadtxt(d / "t.csv", delimiter=",").shape == (2000, 10)


def test_a_temporary_file_left_by_sigkill_is_removed_by_the_next_write(tmp_path):
    script = tmp_path / "saver.ml"
    script.write_text('x = ones(3e6)\nprint("ready")\nwhile true\n    save("ck.npz", {w = x})\nend\n',
                      encoding="utf-8")
    left = []
    for _ in range(20):                 # until a kill lands while a temporary file is open
        proc = subprocess.Popen(TAPEML + [str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=tmp_path)
        try:
            assert proc.stdout.readline() == "ready\n"
            deadline = time.time() + 20
            while time.time() < deadline and not _temps(tmp_path):
                time.sleep(0.001)
            proc.kill()
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        left = _temps(tmp_path)
        if left:
            break
    assert len(left) == 1 and left[0].startswith(".tapeml-") and len(left[0]) < 50
    run("save(p, {w = [1, 2]})", p=str(tmp_path / "other.npz"))     # another file's write keeps it
    assert _temps(tmp_path) == left
    run("save(p, {w = [1, 2]})", p=str(tmp_path / "ck.npz"))        # this run's first write of ck.npz removes it
    assert _temps(tmp_path) == []
    assert _npz(tmp_path / "ck.npz") == (("w", np.array([1.0, 2.0]).tobytes()),)


def test_a_temporary_file_of_a_running_writer_is_kept(tmp_path):
    """A temporary file is removed only when its writer is gone: not while its process runs, and
    not when it is another machine's; a process that started after the file was written is another
    one (its pid reused), so its file is removed."""
    from tapeml.builtins import files
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.05)
        base = "ck.npz"
        live = os.path.basename(files._temp_path(str(tmp_path), base)).split("-")
        live[3] = str(sleeper.pid)
        live_name = "-".join(live)
        other_host = list(live)
        other_host[2] = "%04x" % (int(live[2], 16) ^ 1)
        other_host[3] = "4194304"                       # past Linux's pid range: surely not running
        other_host_name = "-".join(other_host)
        reused = list(live)
        reused[4] = "00000000.tmp"
        reused_name = "-".join(reused)
        for n in (live_name, other_host_name, reused_name):
            (tmp_path / n).write_bytes(b"partial")
        old = time.time() - 3600                        # written an hour before the sleeper started
        os.utime(tmp_path / reused_name, (old, old))
        run("save(p, {w = 1})", p=str(tmp_path / base))
        assert _temps(tmp_path) == sorted([live_name, other_host_name])
    finally:
        sleeper.kill()
        sleeper.wait()
    run("save(p, {w = 1})", p=str(tmp_path / base))      # this run looks once per file: kept
    assert _temps(tmp_path) == sorted([live_name, other_host_name])
    files._SWEPT.clear()                                # as in a new run: the sleeper is gone now
    run("save(p, {w = 1})", p=str(tmp_path / base))
    assert _temps(tmp_path) == [other_host_name]


# ---- loaders: the size guard counts every array before reading one ------------------------------
def test_a_compressed_checkpoint_expanding_past_the_limit_is_refused_unread(tmp_path, monkeypatch):
    """A zip bomb: NumPy's savez_compressed packs 24 MB of zeros into a few KB. Each array alone
    is under the (lowered) limit; together they are not, and nothing is read."""
    p = tmp_path / "bomb.npz"
    np.savez_compressed(p, a=np.zeros(1_500_000), b=np.zeros(1_500_000))
    assert os.path.getsize(p) < 60_000
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 2_500_000)
    with allocates_at_most(6_000_000):          # one array is 12 MB
        err = error_of("load(p)", p=str(p))
    assert isinstance(err, ValueErr) and err.message == (
        f"load(): {p}, a file of {format_gb(os.path.getsize(p))}, holds 2 arrays that together would need "
        f"0.024 GB of float64; the limit is 0.02 GB (half this machine's memory, at most 8 GB)")
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 3_000_000)      # at the limit: read, and exact
    got = output_of("w = load(p)\nprint(size(w.a), size(w.b), sum(w.a) + sum(w.b))", p=str(p))
    assert got == "(1500000,) (1500000,) 0\n"


def test_a_checkpoint_whose_entries_claim_more_than_the_limit_together_is_refused_unread(tmp_path):
    """Three entries whose headers (npy shape and zip size) claim half the limit each, in a file
    of a few hundred bytes: refused by the real limit before a byte of data is read."""
    import struct
    import zipfile
    n = limits.MAX_ELEMENTS // 2
    claimed = 128 + 8 * n                       # the zip entries claim the whole array too
    if claimed >= 2 ** 32:
        pytest.skip("a limit past 4 GB per array: the entries cannot claim it without zip64")
    p = tmp_path / "claims.npz"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_STORED) as z:
        for key in "abc":
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (n,)})
            z.writestr(f"{key}.npy", buf.getvalue() + b"\0" * 8)
    data = bytearray(p.read_bytes())
    for sig, at in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):      # the uncompressed size fields
        i = data.find(sig)
        while i >= 0:
            data[i + at:i + at + 4] = struct.pack("<I", claimed)
            i = data.find(sig, i + 4)
    p.write_bytes(bytes(data))
    with allocates_at_most(20_000_000):
        err = error_of("load(p)", p=str(p))
    assert isinstance(err, ValueErr) and err.message.startswith(
        f"load(): {p}, a file of {format_gb(os.path.getsize(p))}, holds 3 arrays that together would need "
        f"{format_gb(3 * n * 8)} of float64; the limit is")


def test_a_truncated_entry_is_damaged_before_its_array_is_allocated(tmp_path):
    import zipfile
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10_000_000,)})
    p = tmp_path / "short.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("w.npy", buf.getvalue() + b"\0" * 64)
    with allocates_at_most(20_000_000):
        err = error_of("load(p)", p=str(p))
    assert isinstance(err, IOErr) and err.message == (
        f"load(): {p} is damaged or truncated: the array 'w' needs 0.08 GB but its entry holds 1.92e-7 GB")


def test_safetensors_arrays_are_counted_together(tmp_path, monkeypatch):
    from safetensors.numpy import save_file
    p = tmp_path / "two.safetensors"
    save_file({"a": np.zeros(600), "b": np.zeros(600)}, str(p))
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 1000)
    err = error_of("load(p)", p=str(p))
    assert isinstance(err, ValueErr) and err.message.startswith(
        f"load(): {p}, a file of {format_gb(os.path.getsize(p))}, holds 2 arrays that together would need "
        f"9.6e-6 GB of float64; the limit is")


# ---- nesting depth in files ------------------------------------------------------------------------
def _nest(depth: int, leaf=1.0):
    v = leaf
    for _ in range(depth):
        v = Record({"a": v})
    return v


@pytest.fixture(scope="module")
def million_deep():
    return _nest(1_000_000)


@pytest.mark.parametrize("call", slow_after(1, ["save(p, r)", "save(q, r)", "write_json(p, r)"]))
def test_a_million_deep_record_is_refused_at_the_depth_limit(tmp_path, call, million_deep):
    """save of a 1e6-deep record built 1e6 ever longer keys (7.7 GB); now refused at level 1000,
    as write_json refuses it."""
    deep = million_deep
    fname = call.split("(")[0]
    with allocates_at_most(50_000_000):
        err = error_of(call, r=deep, p=str(tmp_path / "d.npz"), q=str(tmp_path / "d.safetensors"))
    assert isinstance(err, ValueErr) and err.message == \
        f"{fname}(): the value nests tuples and records more than 1000 deep"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["d.npz", "d.safetensors"])
def test_a_record_1000_deep_round_trips_and_1001_is_refused(tmp_path, name):
    p = str(tmp_path / name)
    run("save(p, r)", r=_nest(1000, np.arange(3.0)), p=p)
    v = _loaded(p)
    for _ in range(1000):
        assert list(v.fields) == ["a"]
        v = v.fields["a"]
    assert np.array_equal(v, np.arange(3.0))
    err = error_of("save(p, r)", r=_nest(1001), p=p)
    assert err.message == "save(): the value nests tuples and records more than 1000 deep"
    err = error_of("write_json(p, r)", r=_nest(1001), p=p + ".json")
    assert err.message == "write_json(): the value nests tuples and records more than 1000 deep"
    run("write_json(p, r)", r=_nest(1000), p=p + ".json")


def _loaded(p: str):
    return variables_after("back = load(p)", p=p)["back"]


def test_load_of_a_file_nested_past_the_limit_is_refused(tmp_path):
    p = tmp_path / "deep.npz"
    np.savez(p, **{"a" + ".a" * 1000: np.ones(2)})          # NumPy writes it: 1001 levels
    err = error_of("load(p)", p=str(p))
    assert isinstance(err, IOErr) and err.message == \
        f"load(): {p} nests records and tuples more than 1000 deep (an array name of 1001 parts)"
    np.savez(p, **{"a" + ".a" * 999: np.ones(2)})
    v = _loaded(str(p))
    for _ in range(1000):
        v = v.fields["a"]
    assert np.array_equal(v, np.ones(2))


@pytest.mark.parametrize("step", ["open", "fchmod", "fsync", "replace", "close"])
def test_an_interruption_at_any_step_leaves_the_old_or_the_new_file_and_no_temporary_one(tmp_path, monkeypatch,
                                                                                         step):
    """Ctrl-C or SIGTERM (an exception raised between two Python steps) right after each system
    call of the writer. The writer of issue 15 created its temporary file inside mkstemp, before
    its `try`: an interruption there (1 SIGTERM in 200) left the file behind."""
    from tapeml.builtins import files
    path = tmp_path / "t.txt"
    path.write_text("old")
    path.chmod(0o644)
    real = getattr(os, step)
    calls = []

    def interrupted(*a, **k):
        out = real(*a, **k)
        calls.append(step)
        raise KeyboardInterrupt(f"after {step}")

    monkeypatch.setattr(os, step, interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.atomic_write("write_text", str(path), lambda f: f.write("new"), binary=False)
    monkeypatch.undo()
    assert calls == [step]
    assert os.listdir(tmp_path) == ["t.txt"]
    assert path.read_text() == ("new" if step in ("replace", "close") else "old")    # close: of the directory
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# ---- readers: memory in proportion to the file ------------------------------------------------------
def test_readers_take_memory_in_proportion_to_the_file_not_to_the_limit(tmp_path):
    """read_text read with read(limit), which allocates the whole 0.1 GB limit whatever the file;
    read_csv kept every row's strings (28x the file: a 92 MB file took 2.6 GB)."""
    p = tmp_path / "m.csv"
    p.write_text(",".join(["0.5"] * 10) + "\n" * 1 + (",".join(["0.25"] * 10) + "\n") * 99_999)
    size = os.path.getsize(p)
    run("1")                                            # the interpreter's own start-up, outside
    for call, times in (("read_text(p)", 3), ("csv_header(p)", 3), ("read_csv(p)", 5)):
        with allocates_at_most(times * size):
            run(f"x = {call}", p=str(p))
    got = np.loadtxt(p, delimiter=",")                  # NumPy's reader is the reference
    x = variables_after("x = read_csv(p)", p=str(p))["x"]
    assert np.array_equal(x, got) and got.shape == (100_000, 10)


def test_an_array_of_strings_is_refused_before_it_is_read(tmp_path):
    """10 strings of 100 million characters count 10 elements, but take 4 GB: NumPy's
    savez_compressed packs them into a few MB. The type is refused from the header."""
    import zipfile
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<U100000000", "fortran_order": False, "shape": (10,)})
    p = tmp_path / "strings.npz"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("w.npy", "w", force_zip64=True) as member:
            member.write(buf.getvalue())
            chunk = bytes(1 << 24)
            for _ in range(3):                  # 48 MB of the 4 GB: reading it would fail anyway
                member.write(chunk)
    with allocates_at_most(60_000_000):
        err = error_of("load(p)", p=str(p))
    assert isinstance(err, IOErr)
    assert err.message == f"load(): 'w' in {p} has dtype <U100000000; checkpoints hold numbers"


def test_savefig_and_show_tape_write_next_to_the_script(tmp_path):
    """Found by a newcomer: savefig and show_tape(file=) wrote relative paths into the current
    directory while every other writer writes next to the script."""
    import subprocess
    import sys
    sub, cwd = tmp_path / "sub", tmp_path / "cwd"
    sub.mkdir()
    cwd.mkdir()
    (sub / "w.ml").write_text('write_text("a.txt", "x")\nplot([1, 2, 3])\nsavefig("a.png")\n'
                              'show_tape(fn(x) -> sum(x * x), [1, 2], file="tape.png")\n')
    out = subprocess.run([sys.executable, "-m", "tapeml", "../sub/w.ml"], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in sub.iterdir()) == ["a.png", "a.txt", "tape.png", "w.ml"]
    assert list(cwd.iterdir()) == []


# ---- issue 38, item 6: readers of numbers and of paths say the real cause -----------------------------
def test_read_json_reads_an_integer_of_any_length_as_the_float_it_spells(tmp_path):
    p = tmp_path / "big.json"
    big = "1" * 5000
    p.write_text(f'{{"a": -{big}, "b": [1, {"2" * 400}], "c": 12345678901234567890, "d": 1e999, "e": -0}}')
    v = variables_after("r = read_json(p)", p=str(p))["r"].fields
    # Python's float of the same text: no digit limit, correctly rounded (int() stops at 4300 digits)
    assert v["a"] == float("-" + big) == -np.inf and v["d"] == float("1e999") == np.inf
    assert v["b"].tolist() == [1.0, np.inf] and v["c"] == float("12345678901234567890") == 1.2345678901234567e19
    assert v["e"] == 0.0 and np.signbit(v["e"])         # "-0" is the float -0.0, as JSON.parse reads it
    p.write_text("[" + big + "]")
    assert variables_after("r = read_json(p)", p=str(p))["r"].tolist() == [np.inf]


def _loop(tmp_path):
    (tmp_path / "a.ml").symlink_to("b.ml")
    (tmp_path / "b.ml").symlink_to("a.ml")
    return str(tmp_path / "a.ml")


@pytest.mark.parametrize("call", ["import(p)", "read_text(p)", "read_csv(p)", "read_json(p)", "read_columns(p)",
                                  "csv_header(p)", "load(p)"])
def test_every_reader_says_a_loop_of_symbolic_links(tmp_path, call):
    p = _loop(tmp_path)
    err = error_of(f"x = {call}", p=p)
    name = call.split("(")[0]
    head = "import: " if name == "import" else f"{name}(): "
    tail = ' (from "' + p + '")' if name == "import" else ""
    assert (err.kind, err.message, err.span.line, err.span.col) == (
        "IOError", f"{head}no file at {p}: it is a loop of symbolic links (a.ml -> b.ml -> a.ml){tail}", 1, 5)


@pytest.mark.parametrize("call", ['write_text(p, "x")', "write_csv(p, [1])", "write_json(p, 1)", "save(p, {w = 1})"])
def test_every_writer_says_a_loop_of_symbolic_links(tmp_path, call):
    p = _loop(tmp_path)
    err = error_of(call, p=p)
    assert err.message == f"{call.split('(')[0]}(): {p} is a loop of symbolic links (a.ml -> b.ml -> a.ml)"


def test_the_command_line_says_a_loop_of_symbolic_links_and_a_long_chain(tmp_path):
    p = _loop(tmp_path)
    r = subprocess.run(TAPEML + [p], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (2, f"tapeml: cannot open '{p}': it is a loop of symbolic links "
                                           f"(a.ml -> b.ml -> a.ml)\n")
    for i in range(45):                         # l0 -> l1 -> ... -> l45 (no loop; Linux follows 40)
        (tmp_path / f"l{i}").symlink_to(f"l{i + 1}")
    (tmp_path / "l45").write_text("print(1)\n")
    r = subprocess.run(TAPEML + [str(tmp_path / "l0")], capture_output=True, text=True)
    assert r.stderr == f"tapeml: cannot open '{tmp_path / 'l0'}': it is a chain of more than 40 symbolic links\n"
    err = error_of("x = read_text(p)", p=str(tmp_path / "l0"))
    assert err.message == f"read_text(): no file at {tmp_path / 'l0'}: it is a chain of more than 40 symbolic links"


# ---- issue 38, item 9: a PyTorch state dict in and out ------------------------------------------------
def _sequential(torch):
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2),
                               torch.nn.LayerNorm(2)).double()


@pytest.mark.parametrize("ext", [".safetensors", ".npz"])
def test_an_nn_sequential_state_dict_loads_as_a_tuple_and_saves_back_for_load_state_dict(tmp_path, ext):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file
    torch.manual_seed(0)
    model = _sequential(torch)
    sd = model.state_dict()                     # 0.weight, 0.bias, 2.weight, 2.bias, 3.weight, 3.bias
    src, out = str(tmp_path / f"m{ext}"), str(tmp_path / f"out{ext}")
    if ext == ".safetensors":
        save_file(sd, src)                      # torch's own writer
    else:
        np.savez(src, **{k: v.numpy() for k, v in sd.items()})
    v = variables_after("sd = load(src)\nw0 = sd[0].weight\nrelu = sd[1]\nb3 = sd[3].bias\n"
                        "sd2 = tree_map(fn(w) -> w - 0.5, sd)\nsave(out, sd2)", src=src, out=out)
    # a tuple in PyTorch's order, 0-based as PyTorch's: sd[i] is model[i]; the ReLU an empty record
    assert isinstance(v["sd"], tuple) and len(v["sd"]) == 4 and v["relu"].fields == {}
    assert np.array_equal(v["w0"], model[0].weight.detach().numpy())
    assert np.array_equal(v["b3"], model[3].bias.detach().numpy())
    back = load_file(out) if ext == ".safetensors" else {k: torch.from_numpy(a) for k, a in np.load(out).items()}
    assert sorted(back) == sorted(sd)           # the same names written back
    again = _sequential(torch)
    assert str(again.load_state_dict(back, strict=True)) == "<All keys matched successfully>"
    for k, t in again.state_dict().items():
        assert torch.equal(t, sd[k] - 0.5), k


def test_tapemls_earlier_names_and_hugging_face_names_still_load(tmp_path):
    p = str(tmp_path / "old.npz")
    np.savez(p, **{"heads[0].wq": np.ones(2), "heads.1.wq": np.zeros(2)})      # either spelling, even mixed
    v = variables_after("r = load(p)", p=p)["r"]
    assert [h.fields["wq"].tolist() for h in v.fields["heads"]] == [[1.0, 1.0], [0.0, 0.0]]


def test_names_that_are_no_path_and_gaps_too_wide_are_named(tmp_path):
    p = str(tmp_path / "bad.npz")
    np.savez(p, **{"a-b": np.ones(1)})
    err = error_of("load(p)", p=p)
    assert err.message == (f"load(): {p} holds an array named 'a-b', which is not a field path (like 'heads.0.wq' "
                           f"or '0.weight', PyTorch's state-dict names)")
    np.savez(p, **{"0.w": np.ones(1), "5000.w": np.ones(1)})
    err = error_of("load(p)", p=p)
    assert err.message == f"load(): {p} has a tuple of 2 items numbered up to 5000: too many missing to be a list"


def test_a_safetensors_file_whose_shape_and_offsets_disagree_names_the_tensor(tmp_path):
    import json
    import struct
    p = tmp_path / "bad.safetensors"
    head = json.dumps({"w": {"dtype": "F64", "shape": [3, 4], "data_offsets": [0, 64]}}).encode()
    head += b" " * (-len(head) % 8)
    p.write_bytes(struct.pack("<Q", len(head)) + head + bytes(64))
    err = error_of("x = load(p)", p=str(p))
    assert (err.kind, err.message, err.span.line, err.span.col) == (
        "IOError", f"load(): {p} is damaged: the tensor 'w' has the shape 3x4 of F64 (96 bytes), but its data "
                   f"offsets hold 64 bytes", 1, 5)
    good = tmp_path / "g.safetensors"
    run("save(p, {a = [1, 2, 3]})", p=str(good))
    good.write_bytes(good.read_bytes()[:-4])                          # truncated
    err = error_of("x = load(p)", p=str(good))
    assert err.message == (f"load(): {good} is damaged: the tensor 'a' ends at byte 24 of the data, which has "
                           f"20 bytes (a truncated file?)")


# ---- issue 38, item 9: help shows the result its page shows -------------------------------------------
from support import ROOT as ROOT_DIR   # noqa: E402  (ROOT here says whether the tests run as root)


def _page_result(name):
    """The text under the first example on docs/builtins/<name>.md (None: the example printed nothing)."""
    import re
    with open(os.path.join(ROOT_DIR, "docs", "builtins", f"{name}.md"), encoding="utf-8") as f:
        m = re.search(r"### Example 1\n\n```ml\n.*?\n```\n\n(?:```text\n(.*?)\n```)?", f.read(), re.S)
    return m.group(1)


def _help_result(name):
    """The lines help(name) shows under its example's code."""
    from tapeml.builtins.help import help_text
    from tapeml.evaluator.interpreter import Interpreter
    text = help_text(name, Interpreter(out=io.StringIO())).split("\nExample\n", 1)[1]
    text = text.split("\n\nWritten in tapeml", 1)[0]
    shown = [line[2:] for line in text.split("\n") if not line.startswith(("  ml> ", "  ... "))]
    return "\n".join(shown).strip("\n") or None


@pytest.mark.parametrize("name", ["read_csv", "csv_header", "read_columns", "read_json", "read_text", "load",
                                  "save", "write_csv", "write_json", "write_text", "file_exists", "check_nan"])
def test_help_shows_the_result_the_page_shows(name):
    assert _page_result(name) is not None and _help_result(name) == _page_result(name)


@pytest.mark.slow
@pytest.mark.numpy_only     # the pages are NumPy's build: device()'s example shows "numpy" there
def test_every_builtins_help_shows_what_its_page_shows():
    from tapeml.builtins.help import stdlib_table
    from tapeml.builtins.registry import REGISTRY
    names = [n for n in sorted(set(REGISTRY) | set(stdlib_table()))
             if os.path.exists(os.path.join(ROOT_DIR, "docs", "builtins", f"{n}.md"))]
    assert len(names) > 200
    differ = [n for n in names if (REGISTRY[n].category if n in REGISTRY else "") != "Plotting"
              and _help_result(n) != _page_result(n)]
    assert differ == []


# ---- issue 38, item 9: savefig says the path it really wrote ------------------------------------------
def test_savefig_says_the_path_it_wrote_relative_to_the_current_directory(tmp_path):
    (tmp_path / "examples").mkdir()
    script = tmp_path / "examples" / "fig.ml"
    script.write_text('plot([1, 3, 2])\nsavefig("curve.png")\nsavefig(out)\n', encoding="utf-8")
    elsewhere = tempfile.mkdtemp()
    try:
        out = os.path.join(elsewhere, "abs.png")
        src = script.read_text().replace("savefig(out)", f'savefig("{out}")')
        script.write_text(src, encoding="utf-8")
        r = subprocess.run(TAPEML + ["examples/fig.ml"], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        # the script's relative path starts at its folder: the file is examples/curve.png, and so it says
        assert r.stdout == f"figure saved to {os.path.join('examples', 'curve.png')}\nfigure saved to {out}\n"
        assert (tmp_path / "examples" / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert not (tmp_path / "curve.png").exists() and os.path.exists(out)
    finally:
        shutil.rmtree(elsewhere)


def test_the_readme_says_how_to_install_pytorch_for_the_cpu_only():
    """`.[torch]` alone brings PyTorch built for CUDA on Linux (5.7 GB): the README gives the CPU
    wheel's line first, then the extra."""
    with open(os.path.join(ROOT_DIR, "README.md"), encoding="utf-8") as f:
        text = f.read()
    cpu = text.index("    pip install torch --index-url https://download.pytorch.org/whl/cpu\n")
    assert text.index('    pip install -e ".[torch]"\n', cpu) > cpu


def test_every_reader_of_numbers_reads_5000_digits_as_the_float_they_spell(tmp_path):
    """The siblings of read_json: read_csv, read_columns, num and the lexer's literals read a
    5,000-digit integer as Python's float of the text (inf), never through int()'s 4,300-digit limit."""
    big = "1" * 5000
    p = tmp_path / "big.csv"
    p.write_text(f"x,y\n{big},2\n-{big},3\n")
    v = variables_after(f"m = read_csv(p)\nc = read_columns(p)\nn = num(\"{big}\")\nlit = {big}\nneg = -{big}",
                        p=str(p))
    assert v["m"].tolist() == [[float(big), 2.0], [float("-" + big), 3.0]] == [[np.inf, 2.0], [-np.inf, 3.0]]
    assert v["c"].get("x").tolist() == [np.inf, -np.inf]
    assert v["n"] == v["lit"] == float(big) == np.inf and v["neg"] == -np.inf


def test_every_writer_names_the_file_it_wrote_when_the_script_is_in_another_folder(tmp_path):
    """A script's relative path starts at its folder: run from elsewhere, each writer says once, on
    standard error, where the file is (relative to the current directory); from its own folder, or
    with an absolute path, nothing."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "w.ml").write_text(
        'for i in 1:3\n    save("ck.npz", {w = [1, 2]})\nend\nwrite_text("t.txt", "x")\nwrite_csv("t.csv", [1, 2])\n'
        'write_json("t.json", 1)\nshow_tape(fn(x) -> sum(x * 2), [1, 2], file = "tape.png")\n'
        f'save("{tmp_path / "abs.npz"}", {{w = 1}})\n', encoding="utf-8")
    r = subprocess.run(TAPEML + ["examples/w.ml"], cwd=tmp_path, capture_output=True, text=True)
    tail = "a script's relative path starts at the script's folder (examples), not the current directory; " \
           "notes(false) turns these notes off"
    assert (r.returncode, r.stdout) == (0, "")
    assert r.stderr.splitlines() == [
        f"examples/w.ml:2:5: note: save() wrote examples/ck.npz: {tail}",          # once, not 3 times
        f"examples/w.ml:4:1: note: write_text() wrote examples/t.txt: {tail}",
        f"examples/w.ml:5:1: note: write_csv() wrote examples/t.csv: {tail}",
        f"examples/w.ml:6:1: note: write_json() wrote examples/t.json: {tail}",
        f"examples/w.ml:7:1: note: show_tape() wrote examples/tape.png: {tail}"]
    for name in ("ck.npz", "t.txt", "t.csv", "t.json", "tape.png"):
        assert (tmp_path / "examples" / name).exists() and not (tmp_path / name).exists()
    r = subprocess.run(TAPEML + ["w.ml"], cwd=tmp_path / "examples", capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (0, "")
    r = subprocess.run(TAPEML + ["examples/w.ml"], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "TAPEML_NOTES": "0"})
    assert (r.returncode, r.stderr) == (0, "")


def test_a_torch_save_file_is_refused_naming_the_pickle_and_safetensors(tmp_path):
    """A torch.save(model.state_dict()) .pt file was 'damaged or not a checkpoint written by save()'
    (a breaker's finding): it is a zip holding a pickle, which load() does not run."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "seq.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 3)).state_dict(), str(path))
    code, out = run_cli(["-c", f'load("{path}")'])
    assert code == 1
    assert out.splitlines()[0] == (
        f"<string>:1:1: IOError: load(): {path} is a PyTorch pickle (torch.save), which load() does not read "
        f"(a pickle runs code); save the state dict as safetensors in Python: "
        f"safetensors.torch.save_file(model.state_dict(), 'model.safetensors'), then load that")
