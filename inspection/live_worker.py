"""The live inspector's model thread: every client's work, one step at a time, round robin.

    worker = ModelWorker(); worker.start()
    job = worker.submit("client-1", steps, emit)   # steps: an iterator of answers; emit(answer, last) delivers
    worker.sent(job)                               # a job submitted paced=True: one of its answers sent (AHEAD)
    worker.stop()                                  # between two steps: every open job ends with {"stopped": true}

One model answers a classroom, so the work is cut into steps that take a fraction of a second (an inspect is
one step, a generation one step per token) and the clients take turns: a client generating 200 tokens delays
another's inspect by one token's step, not by the whole generation. Each client has at most one job: a newer
request of the same client supersedes its older one (a waiting inspect answers 409, a running generation
stops between two tokens), and never another client's. `emit` must not block: it hands the answer to the
client's connection (inspection/live_server.py), so the model never waits on a socket. Nor does it compute
for a client that does not read: a job whose connection has AHEAD answers not yet sent passes its turns until
the connection sends one (`sent`; for jobs submitted `paced=True`, the streams), so a slow reader gets a slower stream and costs no memory or model time.
"""

import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator

SUPERSEDED = (409, {"error": "superseded by a newer request of the same page"})
STOPPED = {"stopped": True}
AHEAD = 2  # answers of a job computed and not yet sent; the job waits past it


class Job:
    """One request's work: `steps` yields its answers; `emit(answer, last)` delivers each (the last closes it)."""

    def __init__(self, client: str, steps: Iterator, emit: Callable[[object, bool], None], on_cancel=STOPPED,
                 single: bool = False, paced: bool = False):
        self.client, self.steps, self.emit, self.on_cancel = client, steps, emit, on_cancel
        self.single = single  # one step, one answer (an inspect): once begun, it is worth finishing
        self.paced = paced  # its connection reports each answer sent (ModelWorker.sent), and the job waits for it
        self.finished = self.running = False
        self.unsent = 0  # answers emitted that its connection has not yet sent (ModelWorker.sent)

    def ready(self) -> bool:
        """Worth a step now: closed (dropped at its turn), not paced, or its reader not behind."""
        return self.finished or not self.paced or self.unsent < AHEAD

    def finish(self, answer) -> None:
        """Close the job with `answer` (once; the worker drops whatever its step gives after that)."""
        if not self.finished:
            self.finished = True
            self.emit(answer, True)


class ModelWorker:
    def __init__(self):
        self.cond = threading.Condition()
        self.jobs: dict[str, Job] = {}  # client -> its one job
        self.turns: deque[str] = deque()  # clients with a job, in the order they take their next step
        self.stopping = False
        self.thread = threading.Thread(target=self.run, name="live-model", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def submit(self, client: str, steps: Iterator, emit, on_cancel=STOPPED, single: bool = False,
               paced: bool = False) -> Job:
        """Queue `steps` as `client`'s job, in place of its older one: that one answers `on_cancel` now, unless
        it is a single step already under way (its answer is about to come, and the page shows it meanwhile)."""
        job = Job(client, steps, emit, on_cancel, single, paced)
        with self.cond:
            if self.stopping:
                job.finish(STOPPED)
                return job
            older = self.jobs.get(client)
            if older is not None and not (older.single and older.running):
                older.finish(older.on_cancel)
            self.jobs[client] = job
            if client not in self.turns:
                self.turns.append(client)
            self.cond.notify()
        return job

    def sent(self, job: Job) -> None:
        """job's connection sent one of its answers: a job waiting on its reader may take its turn again."""
        with self.cond:
            job.unsent -= 1
            self.cond.notify()

    def cancel(self, job: Job) -> None:
        """End `job` now (its client went away or stopped reading): the worker drops it at its next turn."""
        with self.cond:
            job.finish(job.on_cancel)
            self.cond.notify()  # the worker drops it (and what its steps hold) now, even if nothing else is ready

    def run(self) -> None:
        while True:
            with self.cond:
                while not self.stopping and (turn := self.next_turn()) is None:
                    self.cond.wait()
                if self.stopping:
                    break
                client, job = turn
                job.running = True
            if not job.finished:
                self.step(job)
            with self.cond:
                job.running = False
                if job.finished and self.jobs.get(client) is job:
                    del self.jobs[client]
                if client in self.jobs and client not in self.turns:
                    self.turns.append(client)
        with self.cond:
            for job in self.jobs.values():
                job.finish(STOPPED)
            self.jobs.clear()

    def next_turn(self) -> tuple[str, Job] | None:
        """(client, job) whose turn it is, among the jobs ready for a step (under self.cond); None if none is."""
        for _ in range(len(self.turns)):
            client = self.turns.popleft()
            if self.jobs[client].ready():
                return client, self.jobs[client]
            self.turns.append(client)  # its reader is behind: its turn passes
        return None

    def step(self, job: Job) -> None:
        """One step of `job` on this thread; its answer goes out unless the job was closed meanwhile."""
        try:
            answer, last = next(job.steps), job.single
        except StopIteration:
            answer, last = None, True
        except Exception:  # noqa: BLE001 (a bug of ours: the client gets a 500, the server goes on)
            traceback.print_exc(file=sys.stderr)
            answer, last = (500, {"error": "the server failed on this request; see its terminal"}), True
        with self.cond:
            if job.finished:
                return
            if last:
                job.finished = True
            job.unsent += 1
            job.emit(answer, last)

    def stop_soon(self) -> None:
        """Stop after the step under way (a token, an inspect) and close every job with {"stopped": true}; at
        once, without waiting for that step (the server calls it while its connections can still answer)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """stop_soon, then wait for the thread (at most `timeout` seconds)."""
        self.stop_soon()
        if self.thread.is_alive():
            self.thread.join(timeout)
