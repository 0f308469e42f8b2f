//! A multi-partition call under executors (seed 001 §II-B): queued on
//! every partition's executor, at one place in each queue's order, and
//! run once every executor has reached it — by the last to arrive, while
//! the others wait — so each partition reaches the same point of its
//! order before the call runs and continues after it, as VoltDB's sites
//! meet at a multi-partition transaction's fragments.
//!
//! Invariant: the call runs at most once, and only when every executor
//! has arrived; a meeting cancelled (the executors stopping, or the call
//! not queued on every partition) releases whoever waits at it, and its
//! call is answered `Closed` if it did not run.

use super::Job;
use crate::error::Error;
use parking_lot::{Condvar, Mutex};

pub(super) struct Meeting {
    partitions: usize,
    state: Mutex<State>,
    over: Condvar,
}

struct State {
    arrived: usize,
    /// Ran or cancelled: those waiting go on.
    over: bool,
    job: Option<Job>,
}

impl Meeting {
    pub(super) fn new(partitions: usize, job: Job) -> Self {
        assert!(partitions >= 1);
        Meeting {
            partitions,
            state: Mutex::new(State {
                arrived: 0,
                over: false,
                job: Some(job),
            }),
            over: Condvar::new(),
        }
    }

    /// An executor reached the call in its queue: the last to arrive
    /// runs it with `run` and releases the others; the others wait
    /// until it has run (or the meeting is cancelled).
    pub(super) fn arrive(&self, run: impl FnOnce(Job)) {
        let mut state = self.state.lock();
        state.arrived += 1;
        assert!(state.arrived <= self.partitions, "an executor arrived twice");
        if state.over {
            return;
        }
        if state.arrived == self.partitions {
            let job = state.job.take().expect("the call runs once");
            drop(state);
            // Released however `run` ends, a panic included.
            let _release = Release(self);
            // The other executors wait here, holding no partition lock:
            // the call takes them all (`SerialOrder::enter`).
            run(job);
            return;
        }
        while !state.over {
            self.over.wait(&mut state);
        }
    }

    /// Release whoever waits, and answer the call `Closed` unless it ran.
    pub(super) fn cancel(&self) {
        let mut state = self.state.lock();
        state.over = true;
        if let Some(job) = state.job.take() {
            job.reply.answer(Err(Error::Closed));
        }
        drop(state);
        self.over.notify_all();
    }
}

/// Ends a meeting when dropped: those waiting go on.
struct Release<'a>(&'a Meeting);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.state.lock().over = true;
        self.0.over.notify_all();
    }
}
