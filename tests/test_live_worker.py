"""The live inspector's model thread (inspection/live_worker.py): turns, supersession, cancelling, stopping.

    python -m pytest tests/test_live_worker.py -q
"""

import threading

from inspection.live_worker import STOPPED, SUPERSEDED, ModelWorker


class Inbox:
    """What a job emitted, and an event set when its last answer came."""

    def __init__(self):
        self.answers, self.done = [], threading.Event()

    def __call__(self, answer, last):
        self.answers.append(answer)
        if last:
            self.done.set()


def steps(name, n, log, gate=None):
    """A job of n steps that records each in `log`; the first waits for `gate` if given."""
    for i in range(n):
        if gate is not None and i == 0:
            gate.wait(10)
        log.append((name, i))
        yield f"{name}{i}"


def test_clients_take_turns_a_step_each():
    worker, log, gate = ModelWorker(), [], threading.Event()
    inboxes = {name: Inbox() for name in "abc"}
    worker.submit("a", steps("a", 4, log, gate), inboxes["a"])  # a long generation holds the first turn
    worker.start()
    worker.submit("b", steps("b", 1, log), inboxes["b"])  # an inspect of another client
    worker.submit("c", steps("c", 2, log), inboxes["c"])
    gate.set()
    assert all(inbox.done.wait(10) for inbox in inboxes.values())
    worker.stop()
    assert log == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("c", 1), ("a", 2), ("a", 3)]  # b waited one step of a, not four
    assert inboxes["a"].answers == ["a0", "a1", "a2", "a3", None] and inboxes["b"].answers == ["b0", None]


def test_a_newer_request_supersedes_only_its_own_clients_older_one():
    worker, log, gate = ModelWorker(), [], threading.Event()
    busy, older, newer, other = Inbox(), Inbox(), Inbox(), Inbox()
    worker.submit("x", steps("x", 1, log, gate), busy)  # the model is busy with client x
    worker.start()
    worker.submit("b", steps("old", 1, log), older, on_cancel=SUPERSEDED)  # b types twice while it waits
    worker.submit("c", steps("c", 1, log), other, on_cancel=SUPERSEDED)
    worker.submit("b", steps("new", 1, log), newer, on_cancel=SUPERSEDED)
    gate.set()
    assert newer.done.wait(10) and other.done.wait(10)
    worker.stop()
    assert older.answers == [SUPERSEDED] and ("old", 0) not in log  # never computed
    assert newer.answers == ["new0", None] and other.answers == ["c0", None]  # c's request stands


def test_a_generation_stops_between_two_tokens_when_cancelled_or_superseded():
    worker, log = ModelWorker(), []
    gates = [threading.Event() for _ in range(3)]

    def slow(name):
        for i, gate in enumerate(gates):
            gate.wait(10)
            log.append((name, i))
            yield i

    first, second = Inbox(), Inbox()
    job = worker.submit("a", slow("gen"), first)
    worker.start()
    gates[0].set()
    worker.cancel(job)  # the client stopped reading
    gates[1].set()
    gates[2].set()
    assert first.done.wait(10) and first.answers[-1] == STOPPED
    assert len([entry for entry in log if entry[0] == "gen"]) <= 2  # at most the step under way ran on
    worker.submit("a", steps("after", 1, log), second)
    assert second.done.wait(10) and second.answers == ["after0", None]
    worker.stop()


def test_stopping_ends_every_open_job_and_the_thread():
    worker, log, gate = ModelWorker(), [], threading.Event()
    running, waiting = Inbox(), Inbox()
    worker.submit("a", steps("a", 5, log, gate), running)
    worker.start()
    worker.submit("b", steps("b", 1, log), waiting)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    gate.set()  # the step under way ends; nothing after it runs
    stopper.join(10)
    assert not worker.thread.is_alive()
    assert running.answers[-1] == STOPPED and waiting.answers[-1] == STOPPED and len(log) <= 2
    late = Inbox()
    worker.submit("c", steps("c", 1, log), late)  # after the stop: closed at once
    assert late.answers == [STOPPED]


def test_a_failing_step_answers_500_and_the_worker_goes_on(capsys):
    def broken():
        raise RuntimeError("a bug")
        yield  # noqa: unreachable (a generator)

    worker, failed, fine = ModelWorker(), Inbox(), Inbox()
    worker.start()
    worker.submit("a", broken(), failed)
    assert failed.done.wait(10) and failed.answers[0][0] == 500
    worker.submit("a", steps("ok", 1, []), fine)
    assert fine.done.wait(10) and fine.answers == ["ok0", None]
    worker.stop()
    assert "RuntimeError: a bug" in capsys.readouterr().err


def test_an_inspect_under_way_is_finished_and_answered_though_a_newer_one_came():
    worker, log, gate = ModelWorker(), [], threading.Event()
    started = threading.Event()

    def slow_inspect():
        started.set()
        gate.wait(10)
        yield "old view"

    older, newer = Inbox(), Inbox()
    worker.submit("a", slow_inspect(), older, on_cancel=SUPERSEDED, single=True)
    worker.start()
    started.wait(10)
    worker.submit("a", steps("new", 1, log), newer, on_cancel=SUPERSEDED, single=True)  # typed while it ran
    gate.set()
    assert older.done.wait(10) and newer.done.wait(10)
    worker.stop()
    assert older.answers == ["old view"] and newer.answers == ["new0"]  # one step, one answer each
