//! The commit protocols (seed 000 §2.4, §3.2): a commit record in the
//! session's own partition, and what the commit must then wait for before
//! it is acknowledged, as a [`CommitTicket`].
//!
//! Dependencies a commit must see durable before it is acknowledged:
//! - *physical*: earlier records of other partitions on pages it modified.
//!   RFA (seed 000 §3.2): if a page's GSN is above GSN_flushed (taken at transaction
//!   start) and its last writer is another partition, set needsRemoteFlush;
//! - *read*: records it read or overwrote that another session installed
//!   but whose commit record may not be durable yet (locks are released
//!   before durability). A record's TID names its writer's slot, so the
//!   check is exact: a TID above that partition's durable commit TID sets
//!   needsRemoteFlush. (The paper's page GSN check alone misses this: a
//!   page record can be durable while its transaction's commit is not.)
//!
//! A remote-dependent commit captures every partition's appended position
//! after its own commit record and waits for all of them; its commit record
//! carries that vector, so recovery can refuse it if a dependency did not
//! survive a crash (docs/decisions/022-recovery-and-the-gap-rule.md).
//!
//! Invariant 2 (commit rule): `wait_durable` returns only when the commit
//! record and every record it depends on are durable, per the chosen
//! [`CommitProtocol`] (for `Async` it returns at once and says so).

use super::{Wal, WalSessionLog};
use crate::error::Result;
use crate::ids::{Gsn, LogPos, Tid};
use crate::persist::CommitView;
use crate::wal::partition::Partition;
use crate::wal::record::{self, RecordBody};
use std::sync::Arc;

/// How a commit becomes durable before it is acknowledged.
///
/// What survives: a *process crash* (kill -9) loses nothing the kernel
/// accepted, a *power loss* loses everything not `fdatasync`ed.
///
/// Under every protocol but `Async`, a commit whose log write or sync fails
/// is not acknowledged: it fails with [`crate::Error::Poisoned`] (EIO, a
/// failed `fdatasync`: never retried) or, if the log's disk is full
/// (`ENOSPC` on a write), with [`crate::Error::LogFull`], after which the
/// database refuses writes but keeps serving reads until it is reopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitProtocol {
    /// Flush every partition up to this commit before acknowledging it.
    /// Survives process crash and power loss.
    FlushAll,
    /// Remote Flush Avoidance: flush only the own partition unless the
    /// transaction depends on another partition's unflushed records.
    /// Survives process crash and power loss.
    Rfa,
    /// Passive group commit: flush the own partition, then wait until every
    /// partition is durable up to this commit (their writers flush for their
    /// own commits). Survives process crash and power loss.
    Group,
    /// Group commit with RFA: wait for the own partition only when no
    /// remote dependency exists. Survives process crash and power loss. The
    /// default: these machines have no persistent memory.
    #[default]
    RfaGroup,
    /// Acknowledge at once; the writer flushes in the background. A process
    /// crash loses nothing the kernel accepted; a power loss loses the last
    /// commits (never partially).
    Async,
}

impl CommitProtocol {
    pub fn name(self) -> &'static str {
        match self {
            CommitProtocol::FlushAll => "flush-all",
            CommitProtocol::Rfa => "rfa",
            CommitProtocol::Group => "group",
            CommitProtocol::RfaGroup => "rfa-group",
            CommitProtocol::Async => "async",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            CommitProtocol::FlushAll,
            CommitProtocol::Rfa,
            CommitProtocol::Group,
            CommitProtocol::RfaGroup,
            CommitProtocol::Async,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

/// What a commit still has to wait for before it is acknowledged.
#[derive(Debug, Clone)]
pub struct CommitTicket {
    /// The session's view of the open partitions (`view`): cloning it
    /// writes only to the session's own reference count.
    parts: Arc<[Arc<Partition>]>,
    /// (index into `parts`, position), the commit's own partition first
    /// (unless it has none: a read-only or rollback wait).
    targets: Vec<(u32, LogPos)>,
    /// A remote-dependent commit's TID, published as durable after the
    /// wait (its own partition alone does not make it durable).
    pub(super) remote_tid: Option<Tid>,
    /// A blocking commit: the waiter syncs its own partition (the first
    /// target) itself (`Partition::sync_to`) rather than through the writer.
    pub(super) sync_own: bool,
}

impl crate::persist::DurableWait for CommitTicket {
    fn is_durable(&self) -> bool {
        CommitTicket::is_durable(self)
    }
    fn wait(&self) -> Result<()> {
        CommitTicket::wait(self)
    }
}

impl CommitTicket {
    pub(super) fn new(
        parts: &Arc<[Arc<Partition>]>,
        targets: Vec<(u32, LogPos)>,
        remote_tid: Option<Tid>,
        sync_own: bool,
    ) -> Self {
        debug_assert!(targets.iter().all(|&(i, _)| (i as usize) < parts.len()));
        CommitTicket {
            parts: Arc::clone(parts),
            targets,
            remote_tid,
            sync_own,
        }
    }

    /// The partitions and positions to wait for, in order.
    pub(super) fn targets(&self) -> impl Iterator<Item = (&Arc<Partition>, LogPos)> + '_ {
        self.targets
            .iter()
            .map(|&(i, pos)| (&self.parts[i as usize], pos))
    }

    pub fn is_durable(&self) -> bool {
        self.targets().all(|(p, pos)| p.durable() >= pos)
    }

    pub fn wait(&self) -> Result<()> {
        for (i, (p, pos)) in self.targets().enumerate() {
            if i == 0 && self.sync_own {
                p.sync_to(pos)?;
            } else {
                p.wait_durable(pos)?;
            }
        }
        if let (Some(tid), Some((own, _))) = (self.remote_tid, self.targets().next()) {
            own.mark_commit_durable(tid);
        }
        Ok(())
    }

    /// Ask each target's writer to flush (without waiting).
    pub(super) fn request_flushes(&self) {
        for (p, pos) in self.targets() {
            p.request_flush(pos);
        }
    }
}

impl WalSessionLog {
    /// The delete mark of a commit this session just made (see
    /// `any_remote_unflushed`): the largest clock of any partition, at or
    /// above the GSN of every record appended so far, its commit record
    /// and everything its ticket waits for included.
    pub(super) fn delete_mark_now(&self) -> u64 {
        let mut view = self.view.borrow_mut();
        view.refresh(&self.wal);
        view.list()
            .iter()
            .map(|p| p.clock().get())
            .max()
            .unwrap_or(0)
    }

    /// Did this transaction read or overwrite a record whose commit (by
    /// another session) may not be durable yet?
    ///
    /// `absent_mark`: the largest delete mark (`delete_mark`) of the keys
    /// it read as absent or inserted. A delete leaves no record, so no TID
    /// names the deleter, whose commit the absence depends on; the mark is
    /// a GSN at or above every record logged before the deleter's commit
    /// returned (its commit record and, for a remote deleter, everything
    /// it waits for), so GSN_flushed at or above it says the deleter is
    /// durable. (The page check does not cover it: the page's delete
    /// record can be durable without its commit record, and a later own
    /// write to the page hides the deleter as its last writer.)
    fn any_remote_unflushed(
        &self,
        observed: &[Tid],
        wrote: bool,
        absent_mark: u64,
        known_flushed: Gsn,
    ) -> bool {
        if self.latch.is_some() {
            if !wrote && absent_mark > 0 && !self.partition.all_durable() {
                return true;
            }
            // One log: every commit this one read was appended before its
            // reader's validation ended, so before this commit's record,
            // which its own flush then covers. A read-only commit has no
            // record: it waits if the log is not all durable (TIDs of
            // different sessions are not in log order, so the log's newest
            // durable commit TID cannot tell).
            return !wrote
                && !self.partition.all_durable()
                && observed.iter().any(|&tid| {
                    tid != Tid::ZERO
                        && tid.slot() != self.slot
                        && tid.epoch() >= self.wal.first_epoch()
                });
        }
        let mut view = self.view.borrow_mut();
        view.refresh(&self.wal);
        // `known_flushed` (GSN_flushed at the first write) still vouches
        // for every record at or below it: most marks are old, and reading
        // every partition's clock per commit is what decision 032 removed.
        if absent_mark > known_flushed.get()
            && absent_mark > Wal::flushed_gsn_of(view.list()).get()
        {
            return true;
        }
        for &tid in observed {
            let writer = tid.slot();
            // A TID of an epoch before this process started was made
            // durable (and recovered) before it; its slot may belong to
            // another session now.
            if writer == self.slot || tid == Tid::ZERO || tid.epoch() < self.wal.first_epoch() {
                continue;
            }
            // No partition: written before this process started, durable.
            if let Some(i) = view.index_of(&self.wal, u32::from(writer)) {
                if view.list()[i].durable_commit_tid() < tid {
                    return true;
                }
            }
        }
        false
    }

    /// The commit protocol: append the commit record (if the transaction
    /// wrote) and leave the ticket of what it must wait for.
    pub(super) fn commit(&mut self, commit: &CommitView<'_>) -> Result<()> {
        let tid = commit.tid();
        let observed = commit.depends_on();
        let mut st = self.state.borrow_mut();
        if let Err(e) = self.partition.check_healthy() {
            // Read-only on a stopped partition: this session's own
            // commits that are not durable now never will be, and a
            // read of one must not be acknowledged.
            let own = self.partition.durable_commit_tid();
            if !st.wrote
                && observed
                    .iter()
                    .any(|&t| t != Tid::ZERO && t.slot() == self.slot && t > own)
            {
                return Err(e);
            }
        }
        // A pipelined predecessor that waits for other partitions makes this
        // commit wait for them too (found in review: otherwise an own-only
        // flush acknowledged a successor whose predecessor was then undone).
        // It waits for the positions the predecessor recorded, no further:
        // taking the other partitions' current ends instead made every
        // successor remote in turn, so one remote commit with commits in
        // flight kept the whole session remote for good.
        let mut chained: Option<CommitTicket> = None;
        if let Some(prev) = &self.unresolved_remote {
            if prev.is_durable() {
                if let (Some(t), Some((own, _))) = (prev.remote_tid, prev.targets().next()) {
                    own.mark_commit_durable(t);
                }
                self.unresolved_remote = None;
            } else {
                chained = Some(prev.clone());
            }
        }
        if !self.wal.broken_rfa()
            && !st.needs_remote
            && self.any_remote_unflushed(
                observed,
                st.wrote,
                commit.absent_mark(),
                if st.wrote { st.flushed_at_start } else { Gsn::ZERO },
            )
        {
            st.needs_remote = true;
        }
        if self.wal.broken_rfa() {
            st.needs_remote = false;
            chained = None;
        }
        let protocol = self.wal.protocol;
        let mut view = self.view.borrow_mut();
        view.refresh(&self.wal);
        let own_id = self.partition.id();
        if !st.wrote {
            // Waiting for everything appended is conservative for a chained
            // read-only commit; it writes no record to keep small.
            st.needs_remote |= chained.is_some();
            // Read-only: no commit record. It may still have read another
            // session's commit that is not durable yet, and must not be
            // acknowledged before it is.
            self.pending = st.needs_remote.then(|| {
                let targets = (0..view.list().len() as u32)
                    .map(|i| (i, view.list()[i as usize].appended()))
                    .collect();
                CommitTicket::new(view.list(), targets, None, false)
            });
            if let Some(t) = &self.pending {
                // Group protocols let the other partitions' writers catch
                // up within their group window, as for a writing commit:
                // a request through each one's lock parked read-only
                // commits behind busy writers (decision 032).
                let lazily = matches!(protocol, CommitProtocol::Group | CommitProtocol::RfaGroup);
                for (p, pos) in t.targets() {
                    if lazily && p.id() != own_id {
                        p.request_flush_lazily(pos);
                    } else {
                        p.request_flush(pos);
                    }
                }
            }
            return Ok(());
        }
        let flush_others =
            st.needs_remote || matches!(protocol, CommitProtocol::FlushAll | CommitProtocol::Group);
        // (index in the view, position) of the other partitions to wait for.
        let others: Vec<(u32, LogPos)> = if flush_others {
            view.list()
                .iter()
                .enumerate()
                .filter(|(_, p)| p.id() != own_id)
                .map(|(i, p)| (i as u32, p.appended()))
                .collect()
        } else if let Some(prev) = &chained {
            // The predecessor's targets after its own partition: positions
            // that never exceed the current ends, so the commit record's
            // dependencies stay what recovery can check.
            prev.targets()
                .skip(1)
                .filter_map(|(p, pos)| {
                    let i = view.index_of(&self.wal, p.id());
                    debug_assert!(i.is_some(), "partitions stay open while the log runs");
                    i.map(|i| (i as u32, pos))
                })
                .collect()
        } else {
            Vec::new()
        };
        let deps: Vec<(u32, LogPos)> = others
            .iter()
            .map(|&(i, pos)| (view.list()[i as usize].id(), pos))
            .collect();
        // Remote in RFA's sense: its own partition does not make it durable,
        // so the waiter publishes it once the targets are (flush-all and
        // group also flush the others, but for a commit that needs nothing
        // remote its own partition still decides what it read).
        let remote = st.needs_remote || chained.is_some();
        let body = RecordBody::Commit {
            tid,
            deps: record::Deps::new(&deps),
        };
        if self.wal.broken_commit_ack() {
            // The broken variant (`testing`; constant false otherwise)
            // acknowledged the session's previous commit without waiting;
            // it waits for it now, before this commit record exists, so
            // the log is written about once per commit (a crash planned at
            // the n-th log write lands inside the run, as for the correct
            // protocols) and the last acknowledged commit is never durable
            // while the session runs: what a crash loses does not hang on
            // a writer's timing.
            if let Some(previous) = self.previous.take() {
                previous.request_flushes();
                previous.wait()?;
            }
        }
        let txn = st.txn;
        let end = self.append_pageless(&mut st, txn, &body).1?;
        self.wal.commits.add(self.slot, 1);
        if st.needs_remote {
            self.wal.remote_commits.add(self.slot, 1);
        } else if chained.is_some() {
            self.wal.chained_commits.add(self.slot, 1);
        }
        // A caller that waits at once syncs its own partition itself
        // (`Partition::sync_to`): waking the writer for it would only add a
        // thread handoff (and a race for the same bytes).
        // Flush pipelining (`aether`): the commit is handed to the log's
        // writer, which flushes whatever accumulated; nobody syncs the log
        // himself, a blocking commit too waits for the writer's flush.
        let syncs_itself = self.commit_waits && self.consolidation.is_none();
        // The broken variant asks for its flush at the next commit.
        let asks_flush = !self.wal.broken_commit_ack();
        // Every protocol asks its own partition's writer, unless the caller
        // syncs it itself (async commits ask anyway: nobody waits).
        let request_own =
            asks_flush && (protocol == CommitProtocol::Async || !syncs_itself);
        if !remote {
            self.partition.note_commit_and_request(tid, end, request_own);
        } else if request_own {
            self.partition.request_flush(end);
        }
        let own_index = view.index_of(&self.wal, own_id);
        let own_index = own_index.expect("a session's own partition is open") as u32;
        let mut targets = Vec::with_capacity(1 + others.len());
        targets.push((own_index, end));
        targets.extend(others);
        let ticket = CommitTicket::new(view.list(), targets, remote.then_some(tid), syncs_itself);
        drop(view);
        // The other partitions: flush-all and RFA push every flush
        // themselves; the group variants let the other partitions' writers
        // catch up within their group window.
        match protocol {
            _ if !asks_flush => {}
            CommitProtocol::FlushAll | CommitProtocol::Rfa => {
                for (p, pos) in ticket.targets().skip(1) {
                    p.request_flush(pos);
                }
            }
            CommitProtocol::Group | CommitProtocol::RfaGroup => {
                for (p, pos) in ticket.targets().skip(1) {
                    p.request_flush_lazily(pos);
                }
            }
            CommitProtocol::Async => {}
        }
        if let Some(u) = self.unresolved.lock().back_mut() {
            debug_assert!(u.ticket.is_none(), "one commit per logged transaction");
            u.ticket = Some(ticket.clone());
        }
        if remote {
            self.unresolved_remote = Some(ticket.clone());
        }
        if self.wal.broken_commit_ack() {
            self.previous = Some(ticket);
        } else {
            self.pending = Some(ticket);
        }
        Ok(())
    }
}
