"""The consolidation service: when to consolidate and reflect, for whom, and never twice at once.

Triggers (``settings.consolidation``):

* every ``every_messages`` recorded messages of a user (`notify`, called by `MemoryScope.record`);
* every ``every_seconds``: a sweep over every user with pending messages (this is also how a
  separate worker process, which hears no `notify`, finds work; and how a restarted engine resumes);
* on demand: `consolidate`, `reflect`, `flush`;
* on close: `stop` finishes the current step, then flushes when ``flush_on_close`` (default on).

One user's work runs in one place at a time: a per-user lock inside the process plus a per-user
lease in the store, which also holds across processes: renewed by a heartbeat every third of
``lease_ttl_s`` while the user's work runs, and checked by the store in the same transaction as
every commit (a worker paused past its lease never commits over its successor). Consolidation and
reflection of a user take the same lease, so they never race.

Failures: a failed step (the model failed after its retries, or gave unusable JSON) leaves its
messages pending with their attempt count raised; after ``max_attempts`` they are marked
'failed' and a warning is logged (ids and counts only). The worker backs off from a failing user.
Messages an answer gave no verdict on (it was cut off at the token cap, or skipped them) stay
pending with their attempt counted and are asked again at once in a smaller batch; a single
message cut off again is asked with a doubled token budget. A crash leaves the messages pending
(each step commits in one transaction) and they are picked up again on restart.

Time limits mean what they say: `stop` (and so `MemoryScope.close`) returns within
``close_timeout_s`` even when a model call is still running; that call's step then never
commits, and its messages stay pending for the next run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Literal

from .. import metrics
from ..errors import ConfigError, LeaseLostError, MemoryScopeError, StoreError
from ..log_hygiene import user_ref
from ..models.structured import UsageMeter
from ..procedures.scope import is_scope
from ..procedures.step import learn_run
from ..storage import messages
from ..storage.base import StoredMessage
from .backend import ConsolidationBackend
from .leases import HeldElsewhere, LeaseHeartbeat
from .reflection import ReflectionState, count_failed_attempt, load_state, reflect_user
from .report import ConsolidationReport
from .steps import GoneError, StepEnv, consolidate_batch, select_batch

log = logging.getLogger("memoryscope_plugins.consolidation")

LEASE_HELD = "another worker holds this user's lease"  # a report's skipped_reason

DEFAULTS = {  # settings the service reads with these defaults when ConsolidationSettings lacks them
    "flush_on_close": True,
    "close_timeout_s": 30.0,
    "batch_messages": 12,
    "batch_chars": 16_000,
    "max_backoff_s": 300.0,
    "threads": 4,  # users consolidated in parallel by the worker (one user is never run twice at once)
}
ReflectMode = Literal["auto", "force", "no"]


def _step_ended(outcome: str, store_error: StoreError | None = None) -> None:
    """Report how a consolidation step ended (and a lease lost, or a store error, behind it)."""
    recorder = metrics.recorder()
    recorder.consolidation_step(outcome)
    if outcome == "lease_lost":
        recorder.lease("lost")
    if store_error is not None and outcome == "store_error":
        recorder.store_error("consolidation", type(store_error).__name__)


def no_model_error() -> ConfigError:
    return ConfigError("consolidation needs a model: set llm.provider ('openai' or 'dashscope') and llm.model "
                       "in the settings (or pass llm= to MemoryScope)")


class ConsolidationService:
    """Background and on-demand consolidation / reflection for one store (many users).

    Args:
        backend: the store, embedder, LLM, settings and related-memory search to use (a
            `ConsolidationBackend`, or anything with ``store``/``embedder``/``llm``/``settings``,
            such as a `MemoryScope`).
        owner: the lease owner name (default: host, process id and a random suffix).
    """

    def __init__(self, backend: Any, *, owner: str | None = None) -> None:
        backend = ConsolidationBackend.of(backend)
        if backend.llm is None:
            raise no_model_error()
        self.backend = backend
        self.usage = UsageMeter()
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._cond = threading.Condition()
        self._counts: dict[str, int] = {}
        self._due: set[str] = set()
        self._stopping = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._retry_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._stats: dict[str, int] = {}
        self._stats_lock = threading.Lock()
        self._listeners: list[Callable[[str, ConsolidationReport], None]] = []
        self._active: set[str] = set()  # users whose step runs now
        self._abandoned = False  # set at stop when a step outlives the time limit: it must not commit

    def add_listener(self, callback: Callable[[str, ConsolidationReport], None]) -> None:
        """Call ``callback(user_id, report)`` after every consolidation or reflection run that did
        something (in the thread that ran it). The report holds memory text: log with care."""
        self._listeners.append(callback)

    # -- settings -------------------------------------------------------------------------------
    @property
    def cfg(self):
        return self.backend.settings.consolidation

    def _setting(self, name: str):
        return getattr(self.cfg, name, DEFAULTS[name])

    # -- triggers -------------------------------------------------------------------------------
    def notify(self, user_id: str, count: int = 1) -> None:
        """Note that ``count`` messages of a user were recorded; wakes the worker every
        ``every_messages``. Cheap and non-blocking (called on the record path)."""
        with self._cond:
            total = self._counts.get(user_id, 0) + max(1, int(count))
            self._counts[user_id] = total
            if total >= self.cfg.every_messages:
                self._due.add(user_id)
                self._cond.notify_all()

    @property
    def running(self) -> bool:
        """Whether the background thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the background worker thread (no-op when it runs already)."""
        if self.running:
            return
        with self._cond:
            self._stopping = False
            self._stopped = False
            self._abandoned = False
        self._thread = threading.Thread(target=self.run, name="memoryscope-consolidation", daemon=True)
        self._thread.start()

    def stop(self, *, flush: bool | None = None, timeout: float | None = None) -> None:
        """Stop the worker: no new step starts, the step in progress may finish. Then, when
        ``flush`` (default ``consolidation.flush_on_close``), consolidate what is still pending.
        Returns within ``timeout`` seconds in all (default ``consolidation.close_timeout_s``),
        even if a model call is still running: such a step never commits, so its messages stay
        pending for the next run. Idempotent."""
        budget = timeout if timeout is not None else self._setting("close_timeout_s")
        deadline = time.monotonic() + max(0.0, budget)
        with self._cond:
            already = self._stopped
            self._stopping = True
            self._stopped = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("consolidation still running after %.1f s at stop; its messages stay pending", budget)
                self._abandon_running_steps()
        self._thread = None
        if already:
            return
        if flush if flush is not None else self._setting("flush_on_close"):
            self._flush_within(deadline)

    def _abandon_running_steps(self) -> None:
        """Steps still waiting for the model at stop never commit, and their users' leases are
        given back now, so another process (or the next run) need not wait for them to expire."""
        self._abandoned = True
        with self._locks_guard:
            users = list(self._active)
        for user_id in users:
            try:
                self.backend.store.release_lease(user_id, self.owner)
            except StoreError as exc:
                log.warning("could not release the lease of user %s: %s", user_ref(user_id), type(exc).__name__)

    def _flush_within(self, deadline: float) -> None:
        """`flush` in a helper thread, waited for until ``deadline`` at most."""
        def run() -> None:
            try:
                self.flush(max(0.0, deadline - time.monotonic()))
            except MemoryScopeError as exc:
                log.warning("flush on close failed: %s", type(exc).__name__)
            except Exception as exc:  # noqa: BLE001 - the store may be closed under a late step
                log.debug("flush on close stopped: %s", type(exc).__name__)

        helper = threading.Thread(target=run, name="memoryscope-close-flush", daemon=True)
        helper.start()
        helper.join(max(0.0, deadline - time.monotonic()))
        if helper.is_alive():
            log.warning("flush on close did not finish in time; what is left stays pending for the next run")
            self._abandon_running_steps()

    def run(self, stop_event: threading.Event | None = None) -> None:
        """The worker loop (what the thread runs); returns after `stop` or when ``stop_event`` is set.

        Sweeps at once on start, so work left pending by a previous run resumes immediately.
        """
        interval = self.cfg.every_seconds
        threads = max(1, int(self._setting("threads")))
        pool = ThreadPoolExecutor(threads, thread_name_prefix="memoryscope-consolidation") if threads > 1 else None
        inflight: set[str] = set()
        inflight_lock = threading.Lock()
        held = HeldElsewhere(self.cfg.lease_ttl_s / 5)

        def work(user_id: str) -> None:
            try:
                report = self._work_user(user_id, wait=False, deadline=None, interruptible=True,
                                         stop_event=stop_event)
                if report.skipped_reason == LEASE_HELD:
                    held.add(user_id)
                    with self._cond:
                        self._cond.notify_all()  # the loop waits until this user's retry at the latest
            except Exception as exc:  # noqa: BLE001 - the worker must survive anything
                if self._abandoned:
                    log.debug("an abandoned step of user %s ended: %s", user_ref(user_id), type(exc).__name__)
                else:
                    log.warning("consolidation worker step failed for user %s: %s", user_ref(user_id),
                                type(exc).__name__)
            finally:
                with inflight_lock:
                    inflight.discard(user_id)

        next_sweep = time.monotonic()
        try:
            while not self._halted(stop_event):
                users = self._wait_for_work(next_sweep, stop_event, retry_at=held.next_at)
                if self._halted(stop_event):
                    break
                users |= held.take_due()
                if time.monotonic() >= next_sweep:
                    try:
                        users |= set(self.backend.store.users_with_pending())
                    except StoreError as exc:
                        metrics.recorder().store_error("consolidation", type(exc).__name__)
                        log.warning("consolidation sweep failed: %s", type(exc).__name__)
                    next_sweep = time.monotonic() + interval
                for user_id in sorted(users):
                    if self._halted(stop_event):
                        break
                    if self._retry_at.get(user_id, 0.0) > time.monotonic():
                        continue
                    with inflight_lock:
                        if user_id in inflight:
                            continue  # its running step picks up the new messages, or the next sweep does
                        inflight.add(user_id)
                    with self._cond:
                        self._counts[user_id] = 0
                    if pool is None:
                        work(user_id)
                    else:
                        pool.submit(work, user_id)
        finally:
            if pool is not None:
                pool.shutdown(wait=True)  # steps in progress finish (and stop between batches)

    def _halted(self, stop_event: threading.Event | None) -> bool:
        return self._stopping or (stop_event is not None and stop_event.is_set())

    def _wait_for_work(self, next_sweep: float, stop_event: threading.Event | None, *,
                       retry_at: Callable[[], float] = lambda: float("inf")) -> set[str]:
        """The users notified meanwhile, once there are any or the next sweep or `retry_at()` (read
        again after every notification) has come."""
        with self._cond:
            while not self._due and not self._halted(stop_event):
                remaining = min(next_sweep, retry_at()) - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.25) if stop_event is not None else remaining)
            users, self._due = self._due, set()
        return users

    # -- on demand ------------------------------------------------------------------------------
    def consolidate(self, user_id: str | None = None) -> ConsolidationReport:
        """Consolidate the pending messages of one user (or of every user) now, waiting for a
        worker that is busy with the same user; reflects too when reflection is due."""
        users = [user_id] if user_id is not None else self.backend.store.users_with_pending()
        report = ConsolidationReport()
        for user in users:
            report.merge(self._work_user(user, wait=True, deadline=None, interruptible=False))
        if report.messages == 0 and not report.insights and not report.errors and report.skipped_reason is None:
            report.skipped_reason = "nothing pending to consolidate"
        return report

    def reflect(self, user_id: str) -> ConsolidationReport:
        """Turn the user's not-yet-reflected observations into insights now (even below the
        ``reflect_every_observations`` threshold). Pending messages are not consolidated first."""
        return self._work_user(user_id, wait=True, deadline=None, interruptible=False, consolidate=False,
                               reflect="force")

    def flush(self, timeout: float | None = None) -> bool:
        """Consolidate until no message is pending, or ``timeout`` seconds pass.

        A user whose step fails is not retried within the same flush (its messages stay pending,
        attempts counted). Returns True when no message is left pending.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        given_up: set[str] = set()
        while True:
            users = [u for u in self.backend.store.users_with_pending() if u not in given_up]
            if not users:
                return not given_up
            for user in users:
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                report = self._work_user(user, wait=True, deadline=deadline, interruptible=False)
                if report.errors:
                    given_up.add(user)
            if deadline is not None and time.monotonic() >= deadline:
                return not self.backend.store.users_with_pending()

    # -- asyncio twins ----------------------------------------------------------------------------
    async def aconsolidate(self, user_id: str | None = None) -> ConsolidationReport:
        """Async twin of `consolidate` (runs in a worker thread)."""
        return await asyncio.to_thread(self.consolidate, user_id)

    async def areflect(self, user_id: str) -> ConsolidationReport:
        """Async twin of `reflect`."""
        return await asyncio.to_thread(self.reflect, user_id)

    async def aflush(self, timeout: float | None = None) -> bool:
        """Async twin of `flush`."""
        return await asyncio.to_thread(self.flush, timeout)

    async def astop(self, *, flush: bool | None = None, timeout: float | None = None) -> None:
        """Async twin of `stop`."""
        await asyncio.to_thread(lambda: self.stop(flush=flush, timeout=timeout))

    async def arun(self, stop_event: asyncio.Event | None = None) -> None:
        """The worker loop for ``worker: asyncio``: runs until `stop` / `astop`, or ``stop_event``.

        The loop itself runs in a worker thread (the steps are blocking I/O), so the event loop
        stays free.
        """
        thread_event = threading.Event()
        loop_task = asyncio.ensure_future(asyncio.to_thread(self.run, thread_event))
        if stop_event is None:
            await loop_task
            return
        waiter = asyncio.ensure_future(stop_event.wait())
        try:
            await asyncio.wait({loop_task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            thread_event.set()
            waiter.cancel()
            await loop_task

    def start_async(self) -> "asyncio.Task[None]":
        """Start `arun` as a task of the running event loop (``worker: asyncio``)."""
        with self._cond:
            self._stopping = False
            self._stopped = False
        return asyncio.get_running_loop().create_task(self.arun())

    # -- one user's work ---------------------------------------------------------------------------
    def _lock_for(self, user_id: str) -> threading.Lock:
        with self._locks_guard:
            lock = self._locks.get(user_id)
            if lock is None:
                lock = self._locks[user_id] = threading.Lock()
            return lock

    def _acquire_lease(self, user_id: str, wait: bool, deadline: float | None) -> bool:
        store, ttl = self.backend.store, self.cfg.lease_ttl_s
        pause = 0.02
        while True:
            if store.acquire_lease(user_id, self.owner, ttl):
                metrics.recorder().lease("acquired")
                return True
            if not wait or (deadline is not None and time.monotonic() >= deadline):
                metrics.recorder().lease("busy")
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _work_user(self, user_id: str, *, wait: bool, deadline: float | None, interruptible: bool,
                   consolidate: bool = True, reflect: ReflectMode = "auto",
                   stop_event: threading.Event | None = None) -> ConsolidationReport:
        """Consolidate a user's pending messages batch by batch, then reflect when due, holding
        the user's lock and lease throughout."""
        report = ConsolidationReport()
        lock = self._lock_for(user_id)
        if wait:
            timeout = -1 if deadline is None else max(0.0, deadline - time.monotonic())
            acquired = lock.acquire(timeout=timeout)
        else:
            acquired = lock.acquire(blocking=False)
        if not acquired:
            report.skipped_reason = "this user is being consolidated by another thread"
            return report
        try:
            if not self._acquire_lease(user_id, wait, deadline):
                report.skipped_reason = LEASE_HELD
                return report
            with self._locks_guard:
                self._active.add(user_id)
            try:
                def renew() -> bool:  # after stop gave the lease back, never take it again
                    return self._abandoned or self.backend.store.renew_lease(user_id, self.owner,
                                                                             self.cfg.lease_ttl_s)
                with LeaseHeartbeat(user_id, renew, self.cfg.lease_ttl_s / 3) as beat:
                    env = StepEnv(self.backend, self.usage, lease_owner=self.owner,
                                  check_lease=lambda: not self._abandoned and not beat.lost and renew())
                    if consolidate:
                        self._consolidate_pending(env, user_id, report, interruptible, deadline, stop_event)
                    if reflect != "no" and not report.errors and not is_scope(user_id) \
                            and not (interruptible and self._halted(stop_event)):
                        self._reflect(env, user_id, report, force=reflect == "force")
            finally:
                with self._locks_guard:
                    self._active.discard(user_id)
                if not self._abandoned:  # else given back at stop, and the store may be closed now
                    try:
                        self.backend.store.release_lease(user_id, self.owner)
                    except StoreError as exc:
                        log.warning("could not release the lease of user %s: %s", user_ref(user_id), type(exc).__name__)
        finally:
            lock.release()
        if report.errors:
            failures = self._failures.get(user_id, 0) + 1
            self._failures[user_id] = failures
            backoff = min(self._setting("max_backoff_s"), self.cfg.every_seconds * 2 ** (failures - 1))
            self._retry_at[user_id] = time.monotonic() + backoff
        else:
            self._failures.pop(user_id, None)
            self._retry_at.pop(user_id, None)
        if report.messages or report.insights or report.errors or report.unaccounted_ids or report.llm_calls:
            log.debug("user %s: %s", user_ref(user_id), report.summary())
            self._count(report)
            for callback in list(self._listeners):
                try:
                    callback(user_id, report)
                except Exception as exc:  # noqa: BLE001 - a listener never breaks consolidation
                    log.warning("a consolidation listener failed: %s", type(exc).__name__)
        return report

    def _count(self, report: ConsolidationReport) -> None:
        with self._stats_lock:
            for name, value in (("messages", report.messages), ("added", len(report.added)),
                                ("merged", len(report.merged)), ("expired", len(report.expired)),
                                ("insights", len(report.insights)), ("flagged", len(report.flagged)),
                                ("errors", len(report.errors)), ("failed_messages", report.failed_messages),
                                ("llm_calls", report.llm_calls), ("prompt_tokens", report.prompt_tokens),
                                ("completion_tokens", report.completion_tokens)):
                self._stats[name] = self._stats.get(name, 0) + value

    def stats(self) -> dict[str, int]:
        """Counts since this service started: messages, added, merged, expired, insights, flagged,
        errors, failed_messages, llm_calls, prompt_tokens, completion_tokens (no memory text)."""
        with self._stats_lock:
            return dict(self._stats)

    def _consolidate_pending(self, env: StepEnv, user_id: str, report: ConsolidationReport, interruptible: bool,
                             deadline: float | None, stop_event: threading.Event | None) -> None:
        store = self.backend.store
        if is_scope(user_id) and not self.backend.settings.procedures.enabled:
            return  # runs queued while procedures were on wait for them to be on again
        size, chars = self._setting("batch_messages"), self._setting("batch_chars")
        boost = 1
        while True:
            if interruptible and self._halted(stop_event):
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            batch = select_batch(store.pending_messages(user_id, limit=size), size, chars)
            if not batch:
                return
            step = ConsolidationReport()
            try:
                if is_scope(user_id):  # an agent's finished runs, one at a time: procedures (docs/procedural.md)
                    batch = batch[:1]
                    learn_run(env, user_id, batch[0], step)
                else:
                    consolidate_batch(env, user_id, batch, report=step, boost=boost)
            except LeaseLostError:
                _step_ended("lease_lost")
                report.merge(step)
                report.errors.append("the user's lease was taken over by another worker")
                log.warning("consolidation of user %s stopped: lease taken over", user_ref(user_id))
                return
            except GoneError:
                _step_ended("gone")
                report.merge(step)
                log.info("consolidation of user %s dropped: its messages were deleted meanwhile", user_ref(user_id))
                return
            except StoreError as exc:
                _step_ended("abandoned" if self._abandoned else "store_error", exc)
                report.merge(step)
                report.errors.append(f"store error: {type(exc).__name__}")
                if self._abandoned:  # the engine closed its store under a step that outlived stop()
                    log.debug("an abandoned step of user %s ended: %s", user_ref(user_id), type(exc).__name__)
                    return
                log.warning("consolidation of user %s stopped by a store error: %s", user_ref(user_id),
                            type(exc).__name__)
                return
            except Exception as exc:  # noqa: BLE001 - model, parsing, or a bug: count the attempt
                _step_ended("failed")
                report.merge(step)
                self._count_failure(user_id, batch, exc, report)
                return
            _step_ended("committed")
            report.merge(step)
            if step.unaccounted_ids:
                left = [m for m in batch if m.id in set(step.unaccounted_ids)]
                self._count_unaccounted(user_id, left, step, report)
                if step.incomplete and len(batch) == 1:
                    boost = min(boost * 2, 4)  # one message cut off: give it more room
                size = max(1, min(size, len(batch)) // 2) if len(batch) > 1 else 1
            else:
                boost = 1

    def _count_unaccounted(self, user_id: str, left: list[StoredMessage], step: ConsolidationReport,
                           report: ConsolidationReport) -> None:
        """Messages the answer gave no verdict on: an attempt is counted, they stay pending (and
        are given up, as 'failed', after max_attempts)."""
        store, limit = self.backend.store, self.cfg.max_attempts
        store.mark_messages([m.id for m in left], messages.FAILED)  # counts one attempt
        retry = [m.id for m in left if m.attempts + 1 < limit]
        if retry:
            store.mark_messages(retry, messages.PENDING)
        exhausted = len(left) - len(retry)
        report.failed_messages += exhausted
        why = "was cut off at the token cap" if step.incomplete else "gave no verdict on them"
        if exhausted:
            log.warning("consolidation gave up on %d message(s) of user %s after %d attempts: the model's "
                        "answer %s", exhausted, user_ref(user_id), limit, why)
        if retry:
            log.warning("%d message(s) of user %s stay pending: the model's answer %s; asking again in a "
                        "smaller batch", len(retry), user_ref(user_id), why)

    def _count_failure(self, user_id: str, batch: list[StoredMessage], exc: Exception,
                       report: ConsolidationReport) -> None:
        """Raise the attempt count of the batch; give up (state 'failed') after max_attempts."""
        store, limit = self.backend.store, self.cfg.max_attempts
        ids = [m.id for m in batch]
        store.mark_messages(ids, messages.FAILED)  # counts one attempt
        retry = [m.id for m in batch if m.attempts + 1 < limit]
        if retry:
            store.mark_messages(retry, messages.PENDING)
        exhausted = len(batch) - len(retry)
        kind = type(exc).__name__
        detail = str(exc)[:300] if isinstance(exc, MemoryScopeError) else kind
        report.errors.append(detail)
        report.failed_messages += exhausted
        if exhausted:
            log.warning("consolidation gave up on %d message(s) of user %s after %d attempts (%s)",
                        exhausted, user_ref(user_id), limit, kind)
        if retry:
            log.warning("consolidation of %d message(s) of user %s failed (%s); they stay pending",
                        len(retry), user_ref(user_id), kind)

    def _count_reflection_failure(self, env: StepEnv, user_id: str, state: ReflectionState | None,
                                  kind: str) -> None:
        """Count the failed attempt on the observations (`reflection.count_failed_attempt`); a
        failure to count it only delays the give-up, so it is logged, not raised."""
        gave_up = 0
        if state is not None:
            try:
                gave_up = count_failed_attempt(env, user_id, state)
            except Exception as exc:  # noqa: BLE001 - the store or the lease failed too: counted next time
                log.warning("reflection for user %s: its failed attempt was not counted (%s)", user_ref(user_id),
                            type(exc).__name__)
        if gave_up:
            log.warning("reflection for user %s gave up on %d observation(s) after %d attempts (%s)",
                        user_ref(user_id), gave_up, self.cfg.max_attempts, kind)
        else:
            log.warning("reflection for user %s failed (%s); will retry later", user_ref(user_id), kind)

    def _reflect(self, env: StepEnv, user_id: str, report: ConsolidationReport, *, force: bool) -> None:
        state: ReflectionState | None = None
        try:
            state = load_state(env, user_id)
            if not force and not state.due(self.cfg.reflect_every_observations):
                return
            result = reflect_user(env, user_id, force=force, state=state)
        except LeaseLostError:
            metrics.recorder().lease("lost")
            report.errors.append("the user's lease was taken over by another worker")
            return
        except GoneError:
            log.info("reflection for user %s dropped: its observations were deleted meanwhile", user_ref(user_id))
            return
        except Exception as exc:  # noqa: BLE001 - observations stay unreflected; retried up to max_attempts
            kind = type(exc).__name__
            report.errors.append(str(exc)[:300] if isinstance(exc, MemoryScopeError) else kind)
            self._count_reflection_failure(env, user_id, state, kind)
            return
        if force and result.skipped_reason and not report.messages:
            report.skipped_reason = result.skipped_reason
        result.skipped_reason = None
        report.merge(result)
