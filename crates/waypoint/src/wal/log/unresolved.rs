//! Per session, the transactions that logged changes and may still
//! become losers: the prune rule's "oldest active transaction" (seed 000
//! §3.4) is the oldest of them.
//!
//! Invariant: an entry leaves a session's queue only once its commit is
//! durable with everything it depends on, or its rollback has ended, so
//! the log below [`Wal::oldest_unresolved_gsn`] holds no record recovery
//! may have to undo.

use super::commit::CommitTicket;
use super::Wal;
use crate::ids::Gsn;
use std::collections::VecDeque;
use std::sync::Arc;

/// A transaction that logged changes and may still become a loser: until
/// its commit is durable with everything it depends on (its ticket), or its
/// rollback has ended, recovery may need its records to undo it.
pub(super) struct Unresolved {
    pub(super) first_gsn: Gsn,
    pub(super) ticket: Option<CommitTicket>,
}

/// A session trims its own queue of unresolved transactions once it is this
/// long (see `WalSessionLog::log_pages`).
pub(super) const UNRESOLVED_TRIM_AT: usize = 1024;

/// Drop the entries at the front of a session's queue whose commits are
/// durable: recovery can no longer need their records to undo them. The
/// queue is in begin order, so the front is the oldest.
pub(super) fn drop_resolved(queue: &mut VecDeque<Unresolved>) {
    while queue
        .front()
        .is_some_and(|u| u.ticket.as_ref().is_some_and(|t| t.is_durable()))
    {
        queue.pop_front();
    }
}

impl Wal {
    /// The smallest first GSN of a transaction recovery might still have to
    /// undo, or [`Gsn::MAX`] if there is none.
    pub fn oldest_unresolved_gsn(&self) -> Gsn {
        let sessions: Vec<_> = self.unresolved.lock().values().cloned().collect();
        let mut oldest = Gsn::MAX;
        for queue in sessions {
            let mut q = queue.lock();
            drop_resolved(&mut q);
            if let Some(u) = q.front() {
                oldest = oldest.min(u.first_gsn);
            }
        }
        oldest
    }

    pub(super) fn unresolved_queue(
        &self,
        slot: u16,
    ) -> Arc<parking_lot::Mutex<VecDeque<Unresolved>>> {
        Arc::clone(self.unresolved.lock().entry(slot).or_default())
    }
}
