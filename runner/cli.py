"""The proofbatch command line: the only module that prints and exits.

Exit codes: 0 when the command completed, whatever the verdicts; 2 on bad
input, with one line naming the file or problem and the fix; 1 when the
prover failed or a validation did not pass; 130 when interrupted by Ctrl-C,
143 on SIGTERM and 129 on SIGHUP (the terminal or ssh session went away):
each stops the command cleanly and says what that left (a sweep or profile
is marked stopped: rerun the same command to resume).

A reader of its output that goes away (``proofbatch run ... | head -1``) is
no failure of the sweep: what would have been printed is dropped and the
command goes on to its own exit code (``_TolerantStream``).

It starts fast: only the module of the command being run is imported
(runner.commands.all_commands lists the others' names and helps), so
``--version``, ``--help`` and ``status`` never load matplotlib, pyarrow,
dask, submitit or a prover's backend (tests/test_startup.py,
benchmarks/checks/startup.py).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import faulthandler
import importlib
import os
import re
import signal
import sys
import threading
from pathlib import Path

from . import subproc
from .commands import all_commands
from .errors import InputError, ProofbatchError

DESCRIPTION = ("Batch proof checking for HOL Light and Isabelle sweeps: per-problem timeout maps, "
               "planned dispatch over local workers, Slurm or Dask, guarded checks forked from "
               "prebuilt images, and resumable Parquet results.")

# Commands that start provers: every temporary folder they make lives in one
# folder of the process that a janitor removes however the process ends,
# kill -9 included (runner.checks.janitor.scratch_root).
SCRATCH_COMMANDS = {"run", "profile", "calibrate", "timeout-map", "serve", "build-native"}

# What to do about each kind of value argparse could not read.
_TYPE_FIXES = {"int": "give a whole number", "float": "give a number in seconds",
               "Path": "give a path"}
# OSErrors whose path the user chose (--out, a map's --out, a corpus): bad
# input, not a failure of proofbatch.
_PATH_ERRNOS = {errno.ENOENT, errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.EACCES,
                errno.EROFS, errno.EPERM, errno.ELOOP, errno.EEXIST}
# A write to a terminal or pipe that is gone: EPIPE (`| tee` killed by the
# same Ctrl-C), EIO (the ssh session's terminal hung up).
_GONE_ERRNOS = {errno.EPIPE, errno.EIO}


class _Parser(argparse.ArgumentParser):
    """argparse that refuses in one line naming the flag and the fix, with no
    usage dump above it (subparsers inherit this class)."""

    def error(self, message: str):
        command = self.prog.removeprefix("proofbatch").strip()
        see = f"see `{self.prog} --help`"
        if m := re.match(r"argument (?P<flag>[^:]+): (?P<what>.*)", message):
            flag = m["flag"].split("/")[0]
            what = m["what"]
            if t := re.match(r"invalid (?P<type>\w+) value: (?P<value>.*)", what):
                fix = _TYPE_FIXES.get(t["type"], see)
                raise InputError(flag, f"cannot read {t['value']}", fix)
            if c := re.match(r"invalid choice: (?P<value>.*?) \(choose from (?P<choices>.*)\)", what):
                raise InputError(flag, f"{c['value']} is not a choice",
                                 f"choose one of {c['choices'].replace(chr(39), '')}")
            if ";" in what:            # our own types say the problem and the fix
                problem, fix = what.split(";", 1)
                raise InputError(flag, problem.strip(), fix.strip())
            raise InputError(flag, what, see)
        raise InputError(f"proofbatch {command}".strip(), message, see)


class _Version(argparse.Action):
    """--version, reading the installed version only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        import importlib.metadata

        print(f"proofbatch {importlib.metadata.version('proofbatch')}")
        parser.exit()


def _command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is no option (the
    top level has only --version and --help, which take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser. Given ``argv``, only the command it names gets its
    arguments (its module is the only one imported); without, every one."""
    parser = _Parser(prog="proofbatch", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = _command_of(argv) if argv is not None else None
    for name, module_name, help_text in all_commands():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if argv is None or name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(command)
            command.set_defaults(handler=module.run)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM: the sweep stops exactly as on Ctrl-C (its prover processes
    and work directory go with it), and the exit code says which."""

    code, word = 143, "terminated (SIGTERM)"


class HungUp(Terminated):
    """SIGHUP: the terminal or ssh session went away. The sweep stops as on
    SIGTERM, is marked stopped, and says so (to whatever still reads it)."""

    code, word = 129, "hung up (SIGHUP: the terminal or ssh session went away)"


_STOPS = {signal.SIGINT: KeyboardInterrupt, signal.SIGTERM: Terminated, signal.SIGHUP: HungUp}


class _Signals:
    """The stop signals while a command runs: each raises its exception in
    the main thread, and the first one received is remembered, so that an
    error the stop itself causes (a write to the pipe or terminal that went
    with it) still ends the command as that stop."""

    def __init__(self):
        self.received: list[int] = []
        self._old: dict[int, object] = {}

    def _handle(self, signum, frame):
        if self.received and signum == signal.SIGHUP:
            return              # already stopping: a dropped terminal may hang up again
        self.received.append(signum)
        # External commands running in any thread (a compiler: minutes) end now,
        # with their children (runner/subproc.py).
        subproc.kill_all()
        raise _STOPS[signal.Signals(signum)]()

    def install(self) -> "_Signals":
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in _STOPS:
            old = signal.getsignal(signum)
            # Ignored stays ignored: `nohup proofbatch run ...` must survive
            # the hang-up it asked to survive, and a background job its Ctrl-C.
            if old == signal.SIG_IGN:
                continue
            self._old[signum] = old
            signal.signal(signum, self._handle)
        return self

    def restore(self) -> None:
        for signum, old in self._old.items():
            signal.signal(signum, old)
        self._old.clear()

    def stop(self) -> type[KeyboardInterrupt] | None:
        return _STOPS[signal.Signals(self.received[0])] if self.received else None


def _say(line: str) -> None:
    """Print one line on stderr, if anything still reads it; a pipe or
    terminal that went away is silenced, so that flushing it at exit cannot
    fail and change the exit code."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            _silence(stream)
        except ValueError:
            pass                  # closed


def _silence(stream) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class _TolerantStream:
    """sys.stdout or sys.stderr, for a command whose reader may go away:
    `proofbatch run ... | head -1` closes the pipe after one line, and the
    sweep behind it is not at fault. The first write or flush that meets a
    closed pipe (EPIPE: Python ignores SIGPIPE, so writes raise) points the
    stream's descriptor at /dev/null and the command goes on; rich's own
    handler would raise SystemExit(1) and stop the sweep mid-way."""

    def __init__(self, stream):
        self._stream = stream

    def _gone(self) -> None:
        _silence(self._stream)

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()
            try:
                self._stream.flush()          # into /dev/null now: the buffer empties
            except OSError:
                pass
        except ValueError:
            pass                              # closed

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _tolerant_output():
    saved = sys.stdout, sys.stderr
    # None: started with the descriptor closed (`proofbatch ... >&-`).
    sys.stdout, sys.stderr = (s if s is None or isinstance(s, _TolerantStream) else _TolerantStream(s)
                              for s in saved)
    try:
        yield
    finally:
        # What is still buffered goes now, through the wrappers: flushed at
        # exit into a closed pipe, it would print "Exception ignored" and
        # exit 120.
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        sys.stdout, sys.stderr = saved


# What a stop leaves, by command: only a sweep (run; profile's and
# calibrate's runs are sweeps too) is marked stopped and resumes.
_LEFT = {
    "run": "the sweep is marked stopped: run the same command again to resume",
    "profile": "the profile's run is marked stopped: run the same command again to resume",
    "calibrate": "its sweep is marked stopped: run the same command again to resume it",
    "serve": "the server is down and its images are gone: run the same command to serve again",
    "extract": "nothing was written to --out (it is written whole at the end): run the same "
               "command again",
    "build-native": "the unfinished build is not in the cache: run the same command again",
}


def _stopped(kind: type[KeyboardInterrupt], command: str | None = None) -> int:
    code, word = (kind.code, kind.word) if issubclass(kind, Terminated) else (130, "interrupted")
    left = _LEFT.get(command or "", "nothing it had written is lost: run the same command again")
    _say(f"proofbatch: {word}; stopped cleanly: {left}")
    return code


def _cache_hint(filename) -> str | None:
    """The fix for a path of proofbatch's own cache that cannot be written
    (a read-only home): the cache is where PROOFBATCH_CACHE says, not a
    path the user gave."""
    env = os.environ.get("PROOFBATCH_CACHE")
    try:
        home = Path.home()
    except RuntimeError:
        return None
    base = Path(env) if env else home / ".cache" / "proofbatch"
    path = Path(os.path.abspath(filename))
    inside = path == base or base in path.parents
    # mkdir -p fails at the first folder it cannot make: ~/.cache itself.
    above = path in base.parents and (env is not None or home in path.parents)
    if not (inside or above):
        return None
    return (f"set PROOFBATCH_CACHE to a writable folder (proofbatch's cache, now {base}"
            f"{'' if env else ', under your home'})")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # Python's default SIGTERM and SIGHUP end the process without running a
    # finally clause, which left loading images, work directories and a
    # sweep that `proofbatch status` called dead behind.
    signals = _Signals().install()
    dumps = _stack_dumps()
    try:
        with _tolerant_output():
            return _main(argv, signals)
    finally:
        signals.restore()
        if dumps:
            faulthandler.unregister(signal.SIGUSR1)


def _stack_dumps() -> bool:
    """`kill -USR1 PID` prints every thread's stack on stderr and the command
    goes on: where a command that seems hung waits (a Dask stop that
    outlived its test's 20 s in CI could not be told otherwise)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (OSError, ValueError):
        return False        # a stderr with no file descriptor (pytest's capture): no dump
    return True


def _main(argv: list[str], signals: _Signals) -> int:
    args = None
    command = _command_of(argv)
    try:
        args = build_parser(argv).parse_args(argv)
        scratch = contextlib.nullcontext()
        if args.command in SCRATCH_COMMANDS:
            from .checks.janitor import scratch_root, usable_tmpdir

            usable_tmpdir()
            scratch = scratch_root()
        with scratch:
            return args.handler(args)
    except InputError as exc:
        _say(f"proofbatch: error: {exc}")
        return 2
    except KeyboardInterrupt as exc:
        return _stopped(signals.stop() or type(exc), command)
    except ProofbatchError as exc:
        if signals.stop():
            return _stopped(signals.stop(), command)
        _say(f"proofbatch: {exc}")
        return 1
    except OSError as exc:
        # Ctrl-C through `| tee` kills tee too, and a dropped ssh session
        # takes its terminal: the writes that follow fail, and that is the
        # stop, not a failure.
        if exc.errno in _GONE_ERRNOS and signals.stop():
            return _stopped(signals.stop(), command)
        if exc.filename and (hint := _cache_hint(exc.filename)):
            _say(f"proofbatch: error: {exc.filename}: {exc.strerror}; {hint}")
            return 2
        if exc.errno == errno.EPIPE:
            # Not our output (_TolerantStream): a process proofbatch writes to exited.
            _say(f"proofbatch: {exc.strerror}: a process proofbatch was writing to exited; "
                 "run the same command again")
            return 1
        # A full disk: every file proofbatch publishes appears whole or not
        # at all (runner/results/publish.py), so nothing written before is lost.
        if exc.errno in _PATH_ERRNOS and exc.filename:
            _say(f"proofbatch: error: {exc.filename}: {exc.strerror}; pass a path that "
                 "proofbatch can create and write")
            return 2
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        where = exc.filename or getattr(args, "out", None) or "output"
        _say(f"proofbatch: {where}: {exc.strerror} while writing results; "
             "everything published before is kept: free space and run the same command again "
             "to resume")
        return 1


if __name__ == "__main__":
    sys.exit(main())
