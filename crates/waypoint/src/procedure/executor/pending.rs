//! A call's answer: `Reply`, where an executor leaves the outcome of a
//! call it ran (or `Closed`), and `PendingCall`, what `Session::submit`
//! gives the caller.
//!
//! Invariant: a reply is answered once.

use super::super::Output;
use crate::error::{Error, Result};
use crate::txn::{CommitInfo, PendingCommit};
use parking_lot::{Condvar, Mutex};
use std::marker::PhantomData;
use std::sync::Arc;

/// Where a call's outcome is left for its caller.
#[derive(Default)]
pub(super) struct Reply {
    outcome: Mutex<Option<Result<(Output, PendingCommit)>>>,
    answered: Condvar,
}

impl Reply {
    /// Answer unless answered already (a call dropped unanswered).
    pub(super) fn answer_if_unanswered(&self, outcome: Result<(Output, PendingCommit)>) {
        let mut slot = self.outcome.lock();
        if slot.is_none() {
            *slot = Some(outcome);
            self.answered.notify_all();
        }
    }

    pub(super) fn answer(&self, outcome: Result<(Output, PendingCommit)>) {
        let mut slot = self.outcome.lock();
        debug_assert!(slot.is_none(), "a call is answered once");
        *slot = Some(outcome);
        self.answered.notify_all();
    }

    fn is_answered(&self) -> bool {
        self.outcome.lock().is_some()
    }

    fn wait_answered(&self) {
        let mut slot = self.outcome.lock();
        while slot.is_none() {
            self.answered.wait(&mut slot);
        }
    }

    fn take(&self) -> Result<(Output, PendingCommit)> {
        let mut slot = self.outcome.lock();
        loop {
            if let Some(outcome) = slot.take() {
                return outcome;
            }
            self.answered.wait(&mut slot);
        }
    }
}

/// A submitted call's answer, untyped.
pub(crate) struct ReplyHandle(pub(super) Arc<Reply>);

impl ReplyHandle {
    /// Wait until the call has run; its outcome.
    pub(crate) fn take(&self) -> Result<(Output, PendingCommit)> {
        self.0.take()
    }
}

/// A call handed to an executor
/// ([`Session::submit`](crate::Session::submit)), or one that ran already:
/// its result once it has run, and its acknowledgement once its commit is
/// durable.
pub struct PendingCall<R> {
    name: Arc<str>,
    state: CallState,
    _result: PhantomData<fn() -> R>,
}

enum CallState {
    Queued(ReplyHandle),
    Ran(Result<(Output, PendingCommit)>),
}

impl<R: 'static> PendingCall<R> {
    pub(crate) fn queued(name: Arc<str>, reply: ReplyHandle) -> Self {
        PendingCall {
            name,
            state: CallState::Queued(reply),
            _result: PhantomData,
        }
    }

    pub(crate) fn ran(name: Arc<str>, outcome: Result<(Output, PendingCommit)>) -> Self {
        PendingCall {
            name,
            state: CallState::Ran(outcome),
            _result: PhantomData,
        }
    }

    /// True once the call has run and is durable, or has failed (never
    /// blocks).
    pub fn is_done(&self) -> bool {
        match &self.state {
            CallState::Queued(reply) => {
                let slot = reply.0.outcome.lock();
                match &*slot {
                    None => false,
                    Some(Ok((_, pending))) => pending.is_durable(),
                    Some(Err(_)) => true,
                }
            }
            CallState::Ran(Ok((_, pending))) => pending.is_durable(),
            CallState::Ran(Err(_)) => true,
        }
    }

    /// Has the call run (committed or failed), durable or not?
    pub fn has_run(&self) -> bool {
        match &self.state {
            CallState::Queued(reply) => reply.0.is_answered(),
            CallState::Ran(_) => true,
        }
    }

    /// Block until the call has run (committed or failed), keeping the
    /// handle: a caller with many calls in flight waits on a later one
    /// to be woken once for all before it (one partition runs its calls
    /// in the order they were queued).
    pub fn wait_until_run(&self) {
        if let CallState::Queued(reply) = &self.state {
            reply.0.wait_answered();
        }
    }

    /// Wait until the call has run, and return its result and the handle
    /// that acknowledges its commit.
    pub fn wait_run(self) -> Result<(R, PendingCommit)> {
        let (out, pending) = match self.state {
            CallState::Queued(reply) => reply.take()?,
            CallState::Ran(outcome) => outcome?,
        };
        let typed = out.downcast::<R>().map_err(|_| Error::ProcedureOutput {
            name: self.name.to_string(),
            expected: std::any::type_name::<R>(),
        })?;
        Ok((*typed, pending))
    }

    /// Wait until the call has run and its commit is durable.
    pub fn wait(self) -> Result<(R, CommitInfo)> {
        let (result, pending) = self.wait_run()?;
        Ok((result, pending.wait()?))
    }
}
