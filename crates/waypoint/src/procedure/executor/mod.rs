//! Executor threads (seed 001 §II-B): with `CommandOptions::executors`,
//! each partition of the serial order is owned by a thread with a
//! session of its own, which runs the partition's single-partition calls
//! one after another from a queue, as a VoltDB site runs its partition's
//! stored procedures. A caller hands its call over ([`Executors::
//! submit`]) and waits for its result ([`PendingCall`]), or keeps many in
//! flight, rather than running the call itself under the partition's lock;
//! callers of one partition then queue their calls instead of contending
//! for the lock. A multi-partition call is queued on every executor and
//! run when all have reached it (`meeting`); multi-partition calls are
//! queued under one lock, so every queue holds them in the same order
//! (no two executors wait for each other at different meetings).
//!
//! An executor still runs each call under its partition's lock (a
//! multi-partition call under all of them: `SerialOrder::enter`), so the
//! snapshot writer's point sees one order, whoever runs the calls.
//!
//! A queue holds at most [`EXECUTOR_QUEUE_LIMIT`] calls: a caller that
//! hands calls over faster than its partition runs them waits for room
//! instead of growing the queue without bound (an executor takes its
//! whole queue at once, so up to twice the limit may be accepted and not
//! yet run). No wait for room is part of a cycle: executors never hand
//! calls over (a procedure on one may not call in again), and only one
//! multi-partition call is ever partly queued (`queueing_all`), so every
//! meeting queued before it is in every queue and an executor that
//! reached the partly queued one has passed them all: the executor of
//! the full queue never waits for the caller, and comes back to its queue.
//! (A procedure body that waits for the calling thread itself can break
//! this; `Session::submit` says so.)
//!
//! Invariant: a submitted call is answered exactly once — with its
//! result and commit handle, with its error (rolled back, logged
//! nowhere), or with `Error::Closed` if the executors stopped first; the
//! calls of one partition run in the order they were queued.

mod meeting;
mod pending;

use super::{panic_text, Decoded, Output, Procedure};
use crate::error::{Error, Result};
use crate::txn::{PendingCommit, Session};
use meeting::Meeting;
use parking_lot::{Condvar, Mutex};
pub use pending::PendingCall;
pub(crate) use pending::ReplyHandle;
use pending::Reply;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How an executor runs a call: `Session`'s own path, under the order.
pub(crate) type RunCall =
    fn(&mut Session, &Procedure, &dyn Decoded, &[u8], bool) -> Result<(Output, PendingCommit)>;

/// Calls an executor's queue holds before a caller handing over another
/// waits for room (`Session::submit`, and `Session::call` under executors).
pub const EXECUTOR_QUEUE_LIMIT: usize = 1024;

/// One queued call.
struct Job {
    procedure: Arc<Procedure>,
    call: Box<dyn Decoded>,
    params: Vec<u8>,
    wait_now: bool,
    reply: Arc<Reply>,
}

/// What a queue holds: a partition's own call, or its place in a
/// multi-partition call.
enum Work {
    One(Job),
    All(Arc<Meeting>),
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<Work>,
    stopped: bool,
}

/// One partition's queue.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
    /// Callers wait here while the queue is full; the executor wakes them
    /// when it takes the queue, a stop when it refuses them.
    room: Condvar,
    /// Set with `stopped`, read between the calls of a batch: a close
    /// does not wait for the rest of a long batch to run.
    stopping: AtomicBool,
}

thread_local! {
    /// Is this thread an executor? A procedure that calls in again from
    /// one would wait for its own queue.
    static ON_EXECUTOR: Cell<bool> = const { Cell::new(false) };
}

/// Is the calling thread an executor (a procedure calling in again)?
pub(crate) fn on_executor() -> bool {
    ON_EXECUTOR.with(Cell::get)
}

/// The executor threads of a serial order, one per partition.
pub(crate) struct Executors {
    queues: Vec<Arc<Queue>>,
    /// Held while a multi-partition call is queued on every executor.
    queueing_all: Mutex<()>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Executors {
    /// Start an executor per session given (one per partition, in
    /// partition order); each runs its calls through `run`.
    pub(crate) fn start(
        sessions: Vec<Session>,
        run: RunCall,
    ) -> Result<Executors> {
        let queues: Vec<Arc<Queue>> = sessions.iter().map(|_| Arc::default()).collect();
        let mut threads = Vec::with_capacity(sessions.len());
        for (partition, mut session) in sessions.into_iter().enumerate() {
            let queue = Arc::clone(&queues[partition]);
            let spawned = std::thread::Builder::new()
                .name(format!("waypoint-executor-{partition}"))
                .spawn(move || executor_thread(&queue, &mut session, run));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => {
                    let started = Executors {
                        queues,
                        queueing_all: Mutex::new(()),
                        threads: Mutex::new(threads),
                    };
                    started.stop();
                    return Err(Error::Internal {
                        what: format!("starting executor thread {partition} failed: {e}"),
                    });
                }
            }
        }
        Ok(Executors {
            queues,
            queueing_all: Mutex::new(()),
            threads: Mutex::new(threads),
        })
    }

    /// How many partitions (executors) there are.
    pub(crate) fn len(&self) -> usize {
        self.queues.len()
    }

    /// Queue a single-partition call on `partition`'s executor.
    pub(crate) fn submit(
        &self,
        partition: usize,
        procedure: Arc<Procedure>,
        call: Box<dyn Decoded>,
        params: Vec<u8>,
        wait_now: bool,
    ) -> Result<ReplyHandle> {
        let (job, reply) = Job::new(procedure, call, params, wait_now);
        if !self.queues[partition].push(Work::One(job)) {
            return Err(Error::Closed);
        }
        Ok(reply)
    }

    /// Queue a multi-partition call on every executor, at the same place
    /// of their order relative to the other multi-partition calls.
    pub(crate) fn submit_all(
        &self,
        procedure: Arc<Procedure>,
        call: Box<dyn Decoded>,
        params: Vec<u8>,
        wait_now: bool,
    ) -> Result<ReplyHandle> {
        let (job, reply) = Job::new(procedure, call, params, wait_now);
        let meeting = Arc::new(Meeting::new(self.queues.len(), job));
        let _one_at_a_time = self.queueing_all.lock();
        for queue in &self.queues {
            if !queue.push(Work::All(Arc::clone(&meeting))) {
                // Stopping: the executors that have it queued go past it.
                meeting.cancel();
                return Err(Error::Closed);
            }
        }
        Ok(reply)
    }

    /// Stop taking calls, answer the queued ones `Closed`, and join the
    /// threads (each drops its session). Idempotent.
    pub(crate) fn stop(&self) {
        for queue in &self.queues {
            queue.stopping.store(true, Ordering::Release);
            queue.state.lock().stopped = true;
            queue.ready.notify_all();
            queue.room.notify_all();
        }
        let me = std::thread::current().id();
        for handle in self.threads.lock().drain(..) {
            // A procedure that closes the database runs on an executor,
            // which ends after the call.
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Executors {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A call dropped unanswered (its executor gone) is answered `Closed`,
/// so no caller waits for it forever.
impl Drop for Job {
    fn drop(&mut self) {
        self.reply.answer_if_unanswered(Err(Error::Closed));
    }
}

impl Job {
    fn new(
        procedure: Arc<Procedure>,
        call: Box<dyn Decoded>,
        params: Vec<u8>,
        wait_now: bool,
    ) -> (Job, ReplyHandle) {
        let reply = Arc::new(Reply::default());
        let job = Job {
            procedure,
            call,
            params,
            wait_now,
            reply: Arc::clone(&reply),
        };
        (job, ReplyHandle(reply))
    }
}

impl Queue {
    /// Queue `work`, once the queue has room; false once the executor is
    /// stopping.
    fn push(&self, work: Work) -> bool {
        let mut state = self.state.lock();
        while state.jobs.len() >= EXECUTOR_QUEUE_LIMIT && !state.stopped {
            self.room.wait(&mut state);
        }
        if state.stopped {
            return false;
        }
        debug_assert!(state.jobs.len() < EXECUTOR_QUEUE_LIMIT, "a queue holds at most its limit");
        state.jobs.push_back(work);
        // Only an executor that found its queue empty waits: a queue that
        // held work already has its executor awake.
        let wake = state.jobs.len() == 1;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        true
    }
}

/// An executor thread: serve the queue; should the executor itself
/// panic (not a procedure: `run_decoded` catches those), poison the
/// database (a call may be half committed) and answer what it held, so
/// no caller and no other executor waits for it.
fn executor_thread(queue: &Queue, session: &mut Session, run: RunCall) {
    ON_EXECUTOR.with(|on| on.set(true));
    let mut batch = VecDeque::new();
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        serve(queue, session, run, &mut batch)
    }));
    if let Err(panic) = served {
        session.db.poison(format!(
            "an executor thread panicked: {}",
            panic_text(panic.as_ref())
        ));
        let mut state = queue.state.lock();
        state.stopped = true;
        batch.extend(state.jobs.drain(..));
        drop(state);
        queue.room.notify_all();
        refuse(batch.drain(..));
    }
}

/// Answer work that will not run `Closed`; cancel its meetings.
fn refuse(work: impl Iterator<Item = Work>) {
    for work in work {
        match work {
            Work::One(job) => drop(job),
            Work::All(meeting) => meeting.cancel(),
        }
    }
}

/// An executor's loop: take everything queued at once, run it in order.
fn serve(queue: &Queue, session: &mut Session, run: RunCall, batch: &mut VecDeque<Work>) {
    loop {
        {
            let mut state = queue.state.lock();
            while state.jobs.is_empty() && !state.stopped {
                queue.ready.wait(&mut state);
            }
            if state.stopped {
                refuse(state.jobs.drain(..));
                return;
            }
            std::mem::swap(batch, &mut state.jobs);
        }
        queue.room.notify_all();
        while let Some(work) = batch.pop_front() {
            if queue.stopping.load(Ordering::Acquire) {
                refuse(std::iter::once(work).chain(batch.drain(..)));
                break;
            }
            match work {
                Work::One(job) => run_job(session, run, job),
                Work::All(meeting) => meeting.arrive(|job| run_job(session, run, job)),
            }
        }
    }
}

/// Run one call and answer it. A panic of the procedure's body is the
/// call's error already (`run_decoded`); one elsewhere (the commit) may
/// leave the call half done, so the database is poisoned.
fn run_job(session: &mut Session, run: RunCall, job: Job) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(session, &job.procedure, job.call.as_ref(), &job.params, job.wait_now)
    }))
    .unwrap_or_else(|panic| {
        let what = format!(
            "running procedure {} on its executor panicked: {}",
            job.procedure.name,
            panic_text(panic.as_ref())
        );
        session.db.poison(what.clone());
        Err(Error::Internal { what })
    });
    job.reply.answer(outcome);
}
