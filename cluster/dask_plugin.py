"""The worker plugin of the Dask executors (cluster/dask.py): what each Dask
worker holds across checks and sweeps on one scheduler: its prover
sessions, a shard writer per sweep, and its own host factor per sweep
(runner/maps/node_factor.py, issue 47)."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
from pathlib import Path

from distributed import Reschedule, WorkerPlugin

from runner.maps import node_factor
from runner.maps.canary import NodeCanary
from runner.results import shards

PLUGIN = "proofbatch-prover"


class ProverPlugin(WorkerPlugin):
    """Held by each Dask worker: its prover sessions (one per backend build),
    and one shard writer per sweep. Registered idempotently, so a second
    sweep on the same scheduler finds the images of the first still loaded."""

    idempotent = True
    name = PLUGIN

    def setup(self, worker) -> None:
        self.worker = worker
        self.safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(worker.name))
        # Guards the dicts below, and is never held across a boot: the worker's
        # event loop takes it (close_run through the driver's client.run,
        # teardown), and a boot under it (70-90 s of CPU for bytecode HOL
        # Light) froze the loop that long: "Event loop was unresponsive in
        # Worker for 213 s", and a driver's Ctrl-C waited as long for close_run.
        self.lock = threading.Lock()
        # One per backend build, held by the task thread that boots and
        # prepares that build's session: other threads of the build wait on
        # it, off the event loop.
        self.gates: dict[str, threading.Lock] = {}
        self.sessions: dict[str, object] = {}
        self.session_names = itertools.count()
        self.prepared: set[tuple[str, str]] = set()
        self.writers: dict[tuple[str, str], shards.ShardWriter] = {}
        # (out, run id) -> this worker's host factor for that sweep.
        self.factors: dict[tuple[str, str], node_factor.NodeFactor] = {}
        # (out, run id) -> this worker's canary for that sweep (runner/maps/canary.py).
        self.canaries: dict[tuple[str, str], object] = {}
        # Runs whose driver finished or stopped: Dask cannot stop a task
        # already running, so its tasks look here before each check.
        self.closed: set[tuple[str, str]] = set()
        self.closing = False
        # Named pipes and scratch files want a local disk.
        self.workdir = Path(tempfile.mkdtemp(prefix="proofbatch-dask-"))

    def teardown(self, worker) -> None:
        with self.lock:
            self.closing = True
            writers, sessions = list(self.writers.values()), list(self.sessions.values())
            self.writers.clear()
            self.sessions.clear()
        for writer in writers:
            writer.close()
        for session in sessions:
            session.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def session(self, backend, run_id: str, problems):
        with self.lock:
            gate = self.gates.setdefault(backend.salt, threading.Lock())
        with gate:
            with self.lock:
                session = self.sessions.get(backend.salt)
                name = f"s{next(self.session_names)}" if session is None else None
            if session is None:
                session = backend.start(self.workdir / name)      # the boot: no lock of the loop's
                with self.lock:
                    closing = self.closing
                    if not closing:
                        self.sessions[backend.salt] = session
                if closing:
                    # The worker closed while this booted: no one else will close it.
                    session.close()
                    raise Reschedule()
            with self.lock:
                ready = (backend.salt, run_id) in self.prepared
            if not ready:
                # All the sweep's setups at once, so shared prefixes share images.
                session.prepare(problems)
                with self.lock:
                    self.prepared.add((backend.salt, run_id))
            return session

    def on_this_node(self, spec, session, out: str, run_id: str, run: list):
        """``run``'s checks with their map limits scaled by this worker's
        factor for the sweep: resolved once, by the first of its threads to
        get there (runner/maps/node_factor.resolve), while the others wait,
        off the event loop, as for a boot; and the worker's canary, its
        baseline checked then too (None without one)."""
        with self.lock:
            gate = self.gates.setdefault(f"factor {out} {run_id}", threading.Lock())
        with gate:
            with self.lock:
                found = self.factors.get((out, run_id))
            if found is None:
                found = node_factor.resolve(spec, session, Path(out))
                watch = None
                if spec.canary is not None:
                    watch = NodeCanary(spec.canary, session, Path(out))
                    watch.start()
                with self.lock:
                    self.factors[(out, run_id)] = found
                    self.canaries[(out, run_id)] = watch
            with self.lock:
                watch = self.canaries.get((out, run_id))
        return node_factor.scale_tasks(run, found.factor, spec), watch

    def writer(self, out: str, run_id: str) -> shards.ShardWriter:
        with self.lock:
            writer = self.writers.get((out, run_id))
            if writer is None:
                writer = shards.ShardWriter(Path(out), f"{run_id}-dask-{self.safe_name}")
                self.writers[(out, run_id)] = writer
            return writer

    def close_run(self, out: str, run_id: str) -> None:
        with self.lock:
            self.closed.add((out, run_id))
            writer = self.writers.pop((out, run_id), None)
        if writer is not None:
            writer.close()
