"""Run directories: naming, exclusive creation, the status vocabulary, and atomic publishing.

Every command that writes a run (``gcsim simulate``, ``gcsim real``, ``gcsim compare``, ``gcsim
study``, ``gcsim data prepare``) goes through this module:

* **Naming** – :func:`new_run_dir` names a default directory ``<root>/<prefix>-<UTC timestamp>``
  (``YYYYmmddTHHMMSSZ``) and, when that name is taken (a run started in the same second),
  ``...-2``, ``-3``, ...; the name is taken by ``os.mkdir`` itself, so two processes never get
  the same one.
* **Exclusive creation at the start** – :func:`new_run_dir` creates the directory before any
  expensive work and claims it with a marker file opened ``O_CREAT | O_EXCL`` (:data:`CLAIM_NAME`)
  and ``flock``-ed for the run's life (:func:`take_claim`), so of two runs given the same ``--out``
  exactly one wins and the other gets a one-line :class:`~gcsim.errors.ConfigError`; a marker whose
  run was killed is taken over under its lock, by one process only. An existing ``--out`` is accepted
  only when it is an empty directory (e.g. the working directory); a run is never merged into a
  directory holding files.
  :func:`check_out_dir` does the same checks without creating anything.
* **Cleanup** – :meth:`NewRunDir.discard` removes what the run wrote (and the directory, when the run
  created it): a run that fails before it has anything worth keeping leaves nothing behind.
* **Status** – :class:`RunStatus` is the one vocabulary of ``status.json``; :func:`write_status` /
  :func:`read_status` write and validate it and :func:`effective_status` turns a ``running`` run
  whose process is gone into ``dead``.
* **Atomic publishing** – :func:`atomic_write_text` / :func:`atomic_write_bytes` (temp file +
  ``os.replace``), :func:`staging_dir` (a hidden temporary directory removed on failure),
  :func:`install_dir` (rename a finished directory into place, replacing an old one last),
  :func:`ensure_dir` for long-lived output directories, :func:`set_aside` for abandoned runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Iterator

from gcsim.errors import ConfigError, RunDirError

#: Marker file that claims a run directory while its run creates it (removed when the run ends).
CLAIM_NAME = ".gcsim-claim"
#: Longest directory-name prefix accepted (scenario or scheme name; file systems allow 255 bytes).
MAX_PREFIX_BYTES = 200


class RunStatus(str, Enum):
    """The values of ``status.json``'s ``status`` field.

    ``running`` while a process works on the run; ``finished`` (``meta.json`` written);
    ``interrupted`` (Ctrl-C, checkpoint kept); ``failed`` (it had to stop; checkpoint kept when it
    got that far). ``dead`` is never written: :func:`effective_status` reports it for a run whose
    status says ``running`` while its process is gone (killed).
    """

    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    DEAD = "dead"

    def __str__(self) -> str:
        return self.value


#: Statuses a run can be written with (``dead`` is only ever inferred).
WRITABLE_STATUSES = (RunStatus.RUNNING, RunStatus.FINISHED, RunStatus.INTERRUPTED, RunStatus.FAILED)


def utc_stamp() -> str:
    """The current UTC time as ``YYYYmmddTHHMMSSZ`` (the timestamp of run-directory names)."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def utc_now_iso() -> str:
    """The current UTC time as ISO 8601 with seconds (``2025-01-01T12:00:00+00:00``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- publishing
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_public(path: Path) -> Path:
    """Give a file or directory made by ``tempfile`` (mode 0600 / 0700) the mode a plain ``open`` /
    ``mkdir`` would have given it under the process umask (usually 0644 / 0755). Returns ``path``."""
    path = Path(path)
    os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~_umask())
    return path


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` via a temporary sibling and ``os.replace`` (never half-written).

    The parent directory must exist. ``fsync`` flushes the file to disk before the rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        make_public(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write_bytes`); parents are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode())


@contextlib.contextmanager
def staging_dir(parent: Path, name: str) -> Iterator[Path]:
    """A hidden temporary directory ``<parent>/.<name>.<random>.tmp`` (mode as ``mkdir``) to assemble
    files in; removed when the block raises (or when it is left and still exists)."""
    tmp = make_public(Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}.", suffix=".tmp")))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install_dir(tmp: Path, target: Path) -> None:
    """Rename the finished directory ``tmp`` to ``target``; an existing ``target`` is moved aside
    first and removed only once the new one is in place."""
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def ensure_dir(path: str | Path, field: str = "--out") -> Path:
    """Create the long-lived output directory ``path`` (and parents) if needed; check it is writable.

    Raises:
        ConfigError: ``field`` when it is a file, under a file, cannot be created or is not writable.
    """
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(field, "a directory (created if absent)", str(path)) from None
    except OSError as e:
        raise ConfigError(field, f"a directory that can be created ({e.strerror})", str(path)) from None
    if not p.is_dir():
        raise ConfigError(field, "a directory (created if absent)", str(path))
    if not os.access(p, os.W_OK | os.X_OK):
        raise ConfigError(field, "a writable directory", str(path))
    return p


def set_aside(run_dir: str | Path) -> Path:
    """Move a run directory that will be restarted to ``<parent>/.<name>.abandoned-<UTC timestamp>``
    (hidden from ``gcsim compare``'s discovery; never deleted). Returns the new path."""
    path = Path(run_dir)
    stamp = utc_stamp()
    target = path.with_name(f".{path.name}.abandoned-{stamp}")
    k = 1
    while target.exists():
        k += 1
        target = path.with_name(f".{path.name}.abandoned-{stamp}-{k}")
    os.rename(path, target)
    return target


# --------------------------------------------------------------------------- creation
#: What ``--out`` may be.
NEW_OR_EMPTY = "a new or empty directory"


def check_out_dir(out_dir: str | Path, field: str = "--out") -> Path:
    """Check that ``out_dir`` can become a new run directory, creating nothing.

    It must be absent or an empty directory, with a name the file system accepts, and its nearest
    existing parent must be a writable directory.

    Raises:
        ConfigError: ``field``, naming the path given.
    """
    p = Path(out_dir)
    if str(out_dir) == "":
        raise ConfigError(field, NEW_OR_EMPTY, str(out_dir))
    if any(len(part.encode()) > 255 for part in p.parts):
        raise ConfigError(field, "a path whose every name is at most 255 bytes", str(out_dir))
    try:
        if p.exists() and not p.is_dir():
            raise ConfigError(field, NEW_OR_EMPTY, _Given(f"{str(out_dir)!r} (not a directory)"))
        held = sorted(c.name for c in p.iterdir()) if p.is_dir() else []
    except OSError as e:  # e.g. a name longer than the file system allows, or no permission to list
        raise ConfigError(field, f"a path the file system accepts ({e.strerror})", str(out_dir)) from None
    others = [h for h in held if h != CLAIM_NAME]
    if CLAIM_NAME in held and stale_claim(p / CLAIM_NAME):
        if not others:
            held = []  # its run was killed (SIGKILL, SIGTERM, power): the directory is free; new_run_dir reclaims it
        else:
            raise ConfigError(field, NEW_OR_EMPTY, _Given(
                f"{str(out_dir)!r} (left half-written by a gcsim run that was killed, pid "
                f"{claim_pid(p / CLAIM_NAME)}: it holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}; "
                f"remove the directory or choose another)"))
    if held:
        what = "another run is writing it" if CLAIM_NAME in held else \
            f"holding {', '.join(held[:3])}{', ...' if len(held) > 3 else ''}"
        raise ConfigError(field, NEW_OR_EMPTY, _Given(f"{str(out_dir)!r} ({what})"))
    parent = p.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(field, f"a path under a directory ({parent} is not a directory)", str(out_dir))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(field, "a path under a writable directory", str(out_dir))
    return p


@dataclass
class NewRunDir:
    """A run directory this process created (or claimed, when it was an existing empty directory).

    Attributes:
        path: the directory as given (or as named by default).
        created: True when this process made the directory (``discard`` then removes it too).
    """

    path: Path
    created: bool
    _claim: Claim | None = field(default=None, repr=False)
    _made_parents: list[Path] = field(default_factory=list, repr=False)

    def release(self) -> None:
        """Remove the claim marker and drop its lock (the run has written what it will write)."""
        if self._claim is not None:
            self._claim.release()
            self._claim = None

    def discard(self) -> None:
        """Remove everything in the directory, and the directory itself (with the parents created for
        it, while empty) when this process created it (a pre-existing empty ``--out`` is left empty)."""
        for child in list(self.path.iterdir()) if self.path.is_dir() else []:
            if child.name == CLAIM_NAME:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        self.release()
        if self.created:
            with contextlib.suppress(OSError):
                self.path.rmdir()
                for parent in self._made_parents:  # deepest first; only while empty
                    parent.rmdir()


def _os_error(field: str, path: Path, e: OSError) -> ConfigError:
    return ConfigError(field, "a path where a directory can be created",
                       _Given(f"{str(path)!r} ({e.strerror or type(e).__name__})"))


class _Given(str):
    def __repr__(self) -> str:
        return str(self)


def _missing_dirs(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, deepest first."""
    out = []
    for p in (path, *path.absolute().parents):
        if p.exists():
            break
        out.append(p)
    return out


def process_start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), which
    tells a process from a later one that got its PID; None where ``/proc`` does not say (not Linux, gone)."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def claim_text() -> str:
    """What a claim marker holds: ``"<pid> <start ticks>"`` of this process (the PID alone where
    :func:`process_start_ticks` cannot tell)."""
    ticks = process_start_ticks(os.getpid())
    return f"{os.getpid()}" + (f" {ticks}" if ticks else "") + "\n"


def claim_pid(marker: Path) -> int | None:
    """The PID a claim marker names, None when it names none (unreadable, or being written this instant)."""
    try:
        parts = marker.read_text().split()
    except OSError:
        return None
    return int(parts[0]) if parts and parts[0].isdigit() else None


def _owner_gone(text: str) -> bool:
    """True when claim text ``"<pid> [<start ticks>]"`` names a process that is gone, or whose PID now
    belongs to a later process (another start time). Text without a PID (being written this instant) and
    this process's own claim are not gone."""
    parts = text.split()
    if not parts or not parts[0].isdigit():
        return False
    pid = int(parts[0])
    if pid == os.getpid():
        return False
    if not process_alive(pid):
        return True
    now = process_start_ticks(pid)
    return len(parts) > 1 and now is not None and now != parts[1]


def _try_lock(fd: int, mode: int) -> bool:
    """``flock(fd, mode | LOCK_NB)``: True when taken (or where the file system has no locks), False
    when another open file holds it."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EINVAL: a file system without flock; the PID check alone decides
        return True
    return True


def stale_claim(marker: Path) -> bool:
    """True when the claim marker ``marker`` was left by a run that is gone: no process holds its lock
    (a claiming process holds an ``flock`` on it for the run's life; the kernel drops it when the process
    dies) and the PID it names is gone or now belongs to a later process (the start time it recorded
    differs). A marker without a readable PID (being written this instant) is not stale."""
    try:
        fd = os.open(marker, os.O_RDONLY)
    except OSError:
        return False
    try:
        if not _try_lock(fd, fcntl.LOCK_SH):
            return False  # a live run holds it
        return _owner_gone(os.pread(fd, 256, 0).decode(errors="replace"))
    finally:
        os.close(fd)  # drops the shared lock taken for the test


@dataclass
class Claim:
    """This process's claim on a directory: the marker :data:`CLAIM_NAME` and the open file whose
    exclusive ``flock`` says, for as long as this process lives, that the claim is live.

    Attributes:
        path: the marker file.
    """

    path: Path
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        """Remove the marker (while it is still this claim's file) and drop the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if _same_file(self._fd, self.path):
                self.path.unlink()
        os.close(self._fd)
        self._fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def take_claim(directory: Path) -> Claim | None:
    """Claim ``directory`` for this process: create :data:`CLAIM_NAME` exclusively (``O_CREAT | O_EXCL``),
    lock it (``flock``, held until :meth:`Claim.release` or this process's end) and write
    :func:`claim_text` into it; a marker left by a run that is gone (:func:`stale_claim`) is taken over in
    place, under its lock, so of two processes taking over the same stale marker at once exactly one wins.

    Returns:
        The :class:`Claim`, or None when a live process holds the directory.
    Raises:
        OSError: the marker cannot be created (read-only file system, no permission).
    """
    marker = directory / CLAIM_NAME
    for _ in range(5):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            try:
                fd = os.open(marker, os.O_RDWR)
            except FileNotFoundError:
                continue  # released this instant: create it afresh
            if not _try_lock(fd, fcntl.LOCK_EX):
                os.close(fd)
                return None  # a live run holds it
            if not _same_file(fd, marker):
                os.close(fd)
                continue  # released (unlinked) between our open and our lock
            if not _owner_gone(os.pread(fd, 256, 0).decode(errors="replace")):
                os.close(fd)
                return None
            os.ftruncate(fd, 0)  # ours now: its run is gone, and we hold the lock
        else:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)  # waits only for a process reading this empty marker
        os.pwrite(fd, claim_text().encode(), 0)
        return Claim(marker, fd)
    return None


def _claim(path: Path, field: str) -> Claim:
    """Claim ``path`` (:func:`take_claim`); refuse when another run holds it or got files into it first."""
    refusal = ConfigError(field, NEW_OR_EMPTY, _Given(f"{str(path)!r} (another run is writing it)"))
    try:
        claim = take_claim(path)
    except OSError as e:
        raise _os_error(field, path, e) from None
    if claim is None:
        raise refusal
    if [c.name for c in path.iterdir()] != [CLAIM_NAME]:  # someone else's run got there first
        claim.release()
        raise refusal
    return claim


def new_run_dir(out_dir: str | Path | None, *, root: str | Path, prefix: str, field: str = "--out",
                prefix_field: str = "name") -> NewRunDir:
    """Create and claim a new run directory, exclusively, before the run does any work.

    Args:
        out_dir: the directory asked for (``--out``), or None for ``<root>/<prefix>-<UTC timestamp>``
            with a ``-2``, ``-3``, ... suffix when a run of the same second holds that name.
        root: parent of default directories (created if absent).
        prefix: the name's prefix (scenario or scheme name).
        field / prefix_field: the fields named in errors about ``out_dir`` / ``prefix``.
    Returns:
        :class:`NewRunDir` (call ``release()`` when the run is complete, ``discard()`` to undo).
    Raises:
        ConfigError: ``out_dir`` exists and is not an empty directory, another run is creating it,
            or it cannot be created (read-only or pseudo file system, a file on the way, a name too
            long); ``prefix`` longer than :data:`MAX_PREFIX_BYTES`.
    """
    if out_dir is not None:
        path = check_out_dir(out_dir, field)
        created = True
        made = _missing_dirs(path.parent) if path.name else []
        try:
            os.mkdir(path)
        except FileExistsError:
            if not path.is_dir():
                raise ConfigError(field, NEW_OR_EMPTY, _Given(f"{str(out_dir)!r} (not a directory)")) from None
            created = False  # an existing empty directory (e.g. '.'): claimed below, never merged into
        except FileNotFoundError:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                os.mkdir(path)
            except FileExistsError:
                created = False
            except OSError as e:
                raise _os_error(field, path, e) from None
        except OSError as e:
            raise _os_error(field, path, e) from None
        try:
            return NewRunDir(path, created, _claim(path, field), made)
        except ConfigError:
            if created and path.is_dir() and not any(path.iterdir()):
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise
    if len(prefix.encode()) > MAX_PREFIX_BYTES:
        raise ConfigError(prefix_field, f"at most {MAX_PREFIX_BYTES} bytes (it names the run directory)",
                          _Given(f"{len(prefix.encode())} bytes"))
    root = Path(root)
    made = _missing_dirs(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _os_error(field, root, e) from None
    base = f"{prefix}-{utc_stamp()}" if prefix else utc_stamp()
    for k in range(1, 10_000):
        path = root / (base if k == 1 else f"{base}-{k}")
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        except OSError as e:
            raise _os_error(field, path, e) from None
        return NewRunDir(path, True, _claim(path, field), made)
    raise ConfigError(field, "a free run-directory name", _Given(f"{root / base}-* all taken"))


# --------------------------------------------------------------------------- status
def process_alive(pid) -> bool:
    """True when ``pid`` is a live process on this machine other than this one."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_status(run_dir: str | Path, status: RunStatus | str, **fields) -> None:
    """Write ``<run_dir>/status.json`` atomically: ``status``, ``updated_utc``, ``pid`` and ``fields``.

    Raises:
        ValueError: ``status`` is not one of :data:`WRITABLE_STATUSES` (a programming error).
    """
    st = RunStatus(status)
    if st not in WRITABLE_STATUSES:
        raise ValueError(f"status: expected one of {[s.value for s in WRITABLE_STATUSES]}, got {st.value!r}")
    data = {"status": st.value, "updated_utc": utc_now_iso(), "pid": os.getpid(), **fields}
    atomic_write_text(Path(run_dir) / "status.json", json.dumps(data, indent=2, default=str))


def read_status(run_dir: str | Path) -> dict | None:
    """``<run_dir>/status.json`` as a dict, or None when absent.

    Raises:
        RunDirError: unreadable JSON, not an object, or a ``status`` outside :class:`RunStatus`.
    """
    p = Path(run_dir) / "status.json"
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise RunDirError(f"{p}: unreadable JSON ({type(e).__name__})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{p}: expected a JSON object, got {type(data).__name__}")
    if data.get("status") not in {s.value for s in RunStatus}:
        raise RunDirError(f"{p}: status: expected one of {', '.join(s.value for s in WRITABLE_STATUSES)}, "
                          f"got {data.get('status')!r}")
    return data


def effective_status(status: dict | None) -> RunStatus | None:
    """The run's state from a :func:`read_status` dict: its ``status``, except that ``running`` whose
    ``pid`` is no live process reads ``dead``. None for None."""
    if status is None:
        return None
    st = RunStatus(status["status"])
    if st is RunStatus.RUNNING and not process_alive(status.get("pid")):
        return RunStatus.DEAD
    return st


__all__ = ["CLAIM_NAME", "MAX_PREFIX_BYTES", "NewRunDir", "RunStatus", "WRITABLE_STATUSES", "atomic_write_bytes",
           "atomic_write_text", "check_out_dir", "effective_status", "ensure_dir", "install_dir", "make_public",
           "new_run_dir", "process_alive", "read_status", "set_aside", "staging_dir", "utc_now_iso", "utc_stamp",
           "write_status"]
