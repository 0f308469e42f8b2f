//! A session's log ([`WalSessionLog`]): every page change of the session
//! appended to its partition under the GSN protocol, its commits (see
//! `commit`), rollbacks, and recovery's undo through a log of its own.
//!
//! GSN protocol: on every page modification the transaction's GSN becomes
//! max(txn GSN, page GSN) + 1; that is the record's GSN and the page's new
//! GSN. Records within a partition are therefore in GSN order.
//!
//! In central mode every session appends to the one partition: the GSN
//! reservation and the append happen under the log's latch
//! ([`WalSessionLog::latch`]), so the log is in GSN order, and a page's
//! last writer is the partition, never "remote". With a consolidation
//! array (`aether`), a group's leader reserves under the latch and each
//! session encodes and fills its records outside it
//! ([`WalSessionLog::log_records`] is the one append path of all three).
//!
//! Invariant: a page's GSN and last writer are stamped with the page still
//! latched, right after its record was appended, so the WAL rule keeps a
//! change out of the data file until its record is durable.

use super::commit::{CommitProtocol, CommitTicket};
use super::unresolved::{drop_resolved, Unresolved, UNRESOLVED_TRIM_AT};
use super::view::PartitionsView;
use super::Wal;
use crate::btree::{PageLog, PageOp, RootId};
use crate::buffer::page;
use crate::buffer::ExclusiveGuard;
use crate::error::Result;
use crate::ids::{Gsn, LogPos};
use crate::persist::{CommitView, SessionLog};
use crate::wal::partition::Partition;
use crate::wal::record::{self, RecordBody, RecordHeader, RecordKind};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;

/// What the session's current transaction has logged so far.
#[derive(Default)]
pub(super) struct TxnState {
    pub(super) txn: u64,
    /// Records are compensation records (a rollback in progress).
    pub(super) compensating: bool,
    pub(super) gsn: Gsn,
    pub(super) flushed_at_start: Gsn,
    pub(super) needs_remote: bool,
    pub(super) wrote: bool,
    pub(super) buf: Vec<u8>,
}

/// The log hooks of one session: a [`PageLog`] that appends records to the
/// session's partition, and the commit protocol.
pub struct WalSessionLog {
    pub(super) wal: Arc<Wal>,
    /// The central log's latch (`Wal::latch`), held from a record's GSN
    /// reservation to its append; `None` for a partition of its own.
    pub(super) latch: Option<Arc<crate::central::LogLatch>>,
    /// The `aether` log's consolidation array: inserts combine into groups
    /// whose leader alone takes the latch, and records are filled in
    /// outside it. `None`: records are encoded and appended under the
    /// latch (or without one, on a partition of its own).
    pub(super) consolidation: Option<Arc<crate::central::Consolidation>>,
    /// This session's entries in `Wal::unresolved`.
    pub(super) unresolved: Arc<parking_lot::Mutex<VecDeque<Unresolved>>>,
    pub(super) partition: Arc<Partition>,
    pub(super) slot: u16,
    pub(super) state: RefCell<TxnState>,
    pub(super) txn_seq: u64,
    pub(super) pending: Option<CommitTicket>,
    /// The broken commit acknowledgement's (`Wal::broken_commit_ack`):
    /// the last commit, acknowledged without a wait, which the next one
    /// waits for.
    pub(super) previous: Option<CommitTicket>,
    /// The coming commit's caller waits for it at once
    /// (`SessionLog::set_commit_waits`).
    pub(super) commit_waits: bool,
    /// The session's last remote-dependent commit, while it may not be
    /// durable: a pipelined successor depends on it (same partition, but its
    /// remote dependencies are not covered by the own flush).
    pub(super) unresolved_remote: Option<CommitTicket>,
    /// The open partitions as this session last saw them (`view`): the
    /// commit path reads them without touching the manager's shared list.
    pub(super) view: RefCell<PartitionsView>,
}

impl WalSessionLog {
    /// Append one record without a page (commit, end) with the next GSN
    /// above the transaction's; returns its GSN and its end position.
    pub(super) fn append_pageless(
        &self,
        st: &mut TxnState,
        txn: u64,
        body: &RecordBody<'_>,
    ) -> (Gsn, Result<LogPos>) {
        let header = self.pageless_header(Gsn::ZERO, txn);
        let floor = st.gsn;
        let (gsn, end) = self.log_records(
            st,
            floor,
            1,
            |_| {},
            || vec![record::SizeAtGsn::of(&header, body)],
            |gsn, buf| record::encode(&RecordHeader { gsn, ..header }, body, buf),
        );
        st.gsn = gsn;
        (gsn, end)
    }

    /// Log `count` records with consecutive GSNs above `floor`: `encode`
    /// appends them to a buffer given the first GSN, `reserved` learns the
    /// first GSN before any of them can be durable (a lower bound of it on
    /// the consolidated path), `sizes` gives their lengths as functions of
    /// their GSNs (used only by the consolidation array). One unit: durable
    /// whole or not at all. Returns the first GSN (also when appending
    /// failed: then it never becomes durable) and the end position.
    ///
    /// Per-worker: reserve and append. Central (`aries`): the same under
    /// the log latch. Consolidated (`aether`): join a group whose leader
    /// reserves under the latch, then encode and fill outside it.
    pub(super) fn log_records(
        &self,
        st: &mut TxnState,
        floor: Gsn,
        count: u64,
        reserved: impl FnOnce(Gsn),
        sizes: impl FnOnce() -> Vec<record::SizeAtGsn>,
        encode: impl Fn(Gsn, &mut Vec<u8>),
    ) -> (Gsn, Result<LogPos>) {
        let mut buf = std::mem::take(&mut st.buf);
        buf.clear();
        let result = match (&self.consolidation, &self.latch) {
            (Some(array), Some(latch)) => {
                // Every GSN handed out from now on lies above the clock.
                reserved(self.partition.clock().plus(1));
                let sizes = sizes();
                debug_assert_eq!(sizes.len() as u64, count);
                let slot = usize::from(self.slot);
                match array.insert(latch, &self.partition, slot, floor, &sizes) {
                    Ok(share) => {
                        let first = share.first_gsn();
                        encode(first, &mut buf);
                        (first, Ok(share.fill(&mut buf)))
                    }
                    Err((first, e)) => (first, Err(e)),
                }
            }
            _ => {
                let latch = self.latch();
                let first = self.partition.reserve_gsns(floor, count);
                reserved(first);
                encode(first, &mut buf);
                let appended = self
                    .partition
                    .append_group(&buf, count, first.plus(count - 1));
                drop(latch);
                (first, appended)
            }
        };
        st.buf = buf;
        result
    }

    /// Take the central log's latch, if the partition is shared: from
    /// before a GSN is reserved until its record is appended.
    #[inline]
    pub(super) fn latch(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.latch.as_ref().map(|l| l.acquire())
    }

    /// Header of a record without a page (commit, end).
    pub(super) fn pageless_header(&self, gsn: Gsn, txn: u64) -> RecordHeader {
        RecordHeader {
            gsn,
            txn,
            watermark: self.partition.durable(),
            ..RecordHeader::default()
        }
    }

    /// Append the end record of `txn`: its rollback is complete.
    fn append_end(&self, txn: u64) -> Result<LogPos> {
        let mut st = self.state.borrow_mut();
        self.append_pageless(&mut st, txn, &RecordBody::End).1
    }

    /// The ticket of the last commit (for pipelined commits).
    pub fn take_ticket(&mut self) -> Option<CommitTicket> {
        self.pending.take()
    }
}

impl PageLog for WalSessionLog {
    fn logged(&self, tree: RootId, page: &mut ExclusiveGuard<'_>, op: PageOp<'_>) -> Result<()> {
        debug_assert!(
            !matches!(
                op,
                PageOp::Image | PageOp::Split { .. } | PageOp::Separator { .. }
            ),
            "structural ops are logged as structure modifications"
        );
        self.log_pages(tree, &mut [page], &[op])
    }

    fn logged_smo(
        &self,
        tree: RootId,
        pages: &mut [&mut ExclusiveGuard<'_>],
        ops: &[PageOp<'_>],
    ) -> Result<()> {
        self.log_pages(tree, pages, ops)
    }
}

impl WalSessionLog {
    /// Log `ops[i]` on `pages[i]` (one page, or the pages of one structure
    /// modification) and stamp the GSNs into the pages.
    fn log_pages(
        &self,
        tree: RootId,
        pages: &mut [&mut ExclusiveGuard<'_>],
        ops: &[PageOp<'_>],
    ) -> Result<()> {
        assert!(!pages.is_empty(), "a log record needs a page");
        assert_eq!(pages.len(), ops.len(), "one op per page");
        let mut st = self.state.borrow_mut();
        if !st.wrote {
            // GSN_flushed is needed only by transactions that write; any
            // snapshot of it is valid, so take it at the first write rather
            // than making every (read-only) transaction pay for it.
            let mut view = self.view.borrow_mut();
            view.refresh(&self.wal);
            st.flushed_at_start = Wal::flushed_gsn_of(view.list());
        }
        let mut floor = st.gsn;
        for page in pages.iter() {
            let prev = page::page_gsn(page.data());
            let writer = page.last_writer();
            if prev > st.flushed_at_start
                && writer != self.partition.id()
                && writer != crate::buffer::WRITER_READ_FROM_DISK
            {
                st.needs_remote = true;
            }
            floor = floor.max(prev);
        }
        // Every record of a group gets a GSN above every page's previous
        // GSN: a copy of any page of the group reaching disk then implies
        // (WAL rule) that every predecessor on every page of the group was
        // durable, so recovery never finds a group half on disk and half
        // beyond a gap.
        let count = pages.len() as u64;
        let unresolved = &self.unresolved;
        let wrote_before = st.wrote;
        let txn = st.txn;
        let compensating = st.compensating;
        let tree = u32::try_from(tree).expect("page ids are below 2^32");
        let watermark = self.partition.durable();
        // Record `i`'s header (but its GSN) and body, made where needed
        // rather than collected (no allocation on the per-worker path).
        let record_at = |i: usize| {
            let page = &pages[i];
            let data = page.data();
            let body = RecordBody::from_page_op(ops[i], data);
            let header = RecordHeader {
                gsn: Gsn::ZERO,
                txn,
                page: page.page_id(),
                prev_gsn: page::page_gsn(data),
                compensation: compensating,
                smo_more: body.kind().is_structural() && i + 1 < pages.len(),
                page_kind: if body.kind() == RecordKind::Image {
                    data[6]
                } else {
                    0
                },
                tree,
                watermark,
            };
            (header, body)
        };
        let (first, appended) = self.log_records(
            &mut st,
            floor,
            count,
            |first| {
                if !wrote_before {
                    let mut queue = unresolved.lock();
                    // The checkpointer's scan drops resolved entries;
                    // without checkpoints nothing did, and the queue kept a
                    // ticket per transaction for good (a leak of ~20 MB/s
                    // in YCSB-A). A long queue is trimmed here; the bound
                    // keeps the common path free of the scan.
                    if queue.len() >= UNRESOLVED_TRIM_AT {
                        drop_resolved(&mut queue);
                    }
                    queue.push_back(Unresolved {
                        first_gsn: first,
                        ticket: None,
                    });
                }
            },
            || {
                (0..pages.len())
                    .map(|i| {
                        let (h, b) = record_at(i);
                        record::SizeAtGsn::of(&h, &b)
                    })
                    .collect()
            },
            |first, buf| {
                for i in 0..pages.len() {
                    let (header, body) = record_at(i);
                    let header = RecordHeader {
                        gsn: first.plus(i as u64),
                        ..header
                    };
                    record::encode(&header, &body, buf);
                }
            },
        );
        st.gsn = first.plus(count - 1);
        st.wrote = true;
        // Stamped even when the append failed: the partition is then poisoned
        // or full and never durable up to these GSNs, so the WAL rule keeps
        // the unlogged change from ever reaching the data file.
        let end = *appended.as_ref().unwrap_or(&LogPos::MAX);
        for (i, page) in pages.iter_mut().enumerate() {
            page::set_page_gsn(page.data_mut(), first.plus(i as u64));
            page.set_last_writer(self.partition.id(), end);
        }
        match appended {
            Ok(_) => Ok(()),
            // The log's disk is full: a rollback still completes in memory,
            // so readers see the transaction undone. Its compensation
            // records are not logged, and need not be: the transaction has
            // no commit record that could become durable (or one that can
            // no longer), so recovery undoes it from its durable records,
            // and the pages changed here carry GSNs above everything the
            // full partition made durable, so the WAL rule keeps them out
            // of the data file until the reopen (docs/decisions/
            // 021-full-log-disk.md).
            Err(e) if e.is_log_full() && st.compensating => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl SessionLog for WalSessionLog {
    fn page_log(&self) -> &dyn PageLog {
        self
    }

    fn on_begin(&mut self) {
        self.wal.wait_under_limit();
        self.txn_seq += 1;
        let mut st = self.state.borrow_mut();
        // Unique across restarts too: the partition's end position grows
        // with every transaction that logs anything, and one that logged
        // nothing leaves no record to confuse.
        st.txn = ((self.slot as u64) << 48) | (self.partition.appended().get() & ((1 << 48) - 1));
        st.compensating = false;
        st.gsn = st.gsn.max(self.partition.clock());
        st.needs_remote = false;
        st.wrote = false;
    }

    fn on_commit(&mut self, commit: &CommitView<'_>) -> Result<()> {
        self.commit(commit)
    }

    fn delete_mark(&self) -> u64 {
        self.delete_mark_now()
    }

    fn begin_rollback(&mut self) {
        self.state.borrow_mut().compensating = true;
    }

    /// Close a rollback that changed pages, and wait (still under the
    /// transaction's locks) until it and everything its compensation records
    /// depend on are durable. Otherwise a crash could keep a later
    /// transaction's reuse of the keys but lose the end record (recovery
    /// would undo the rolled-back transaction again, over the later work),
    /// or keep the end record but lose a page predecessor of a compensation
    /// record (leaving the transaction half undone). Rollbacks after
    /// placeholders are rare (a conflict at validation), so the sync is.
    ///
    /// The end record is appended only after the compensation records'
    /// dependencies on other partitions are durable: this partition's
    /// writer makes its own records durable regardless of the others, so an
    /// end record appended first could survive a crash (or a full disk)
    /// that lost a predecessor of a compensation record on another
    /// partition. Redo then stops at that gap, the compensation is not
    /// applied, and the end record keeps recovery from undoing the
    /// transaction: a placeholder or an overwritten value would stay
    /// (recovery's own undo orders its end records the same way). If that
    /// wait fails, no end record is written and the transaction stays a
    /// loser that recovery undoes.
    fn end_rollback(&mut self) -> Result<()> {
        let (txn, wrote, remote) = {
            let mut st = self.state.borrow_mut();
            st.compensating = false;
            (st.txn, st.wrote, st.needs_remote)
        };
        if !wrote {
            return Ok(());
        }
        if remote || self.unresolved_remote.is_some() {
            let deps = {
                let mut view = self.view.borrow_mut();
                view.refresh(&self.wal);
                let targets = view
                    .list()
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.id() != self.partition.id())
                    .map(|(i, p)| (i as u32, p.appended()))
                    .collect();
                CommitTicket::new(view.list(), targets, None, false)
            };
            deps.request_flushes();
            deps.wait()?;
        }
        let end = self.append_end(txn)?;
        self.partition.request_flush(end);
        self.partition.wait_durable(end)?;
        // Rolled back for good: recovery will not need its records.
        let done = self.unresolved.lock().pop_back();
        debug_assert!(done.is_some_and(|u| u.ticket.is_none()));
        Ok(())
    }

    fn set_commit_waits(&mut self, waits: bool) {
        self.commit_waits = waits;
    }

    fn take_pending(&mut self) -> Option<Box<dyn crate::persist::DurableWait>> {
        if self.wal.protocol == CommitProtocol::Async {
            self.pending = None;
            return None;
        }
        self.pending
            .take()
            .map(|t| Box::new(t) as Box<dyn crate::persist::DurableWait>)
    }

    fn wait_durable(&mut self) -> Result<()> {
        if self.wal.protocol == CommitProtocol::Async {
            return Ok(());
        }
        match &self.pending {
            Some(t) => t.wait(),
            None => Ok(()),
        }
    }
}

/// Recovery undoes losers through a session log of its own: records it
/// writes carry the loser's transaction id and the compensation flag.
impl crate::wal::recovery::UndoLog for WalSessionLog {
    fn begin_undo(&mut self, txn: u64) {
        let mut st = self.state.borrow_mut();
        st.txn = txn;
        st.compensating = true;
        st.gsn = st.gsn.max(self.partition.clock());
        st.flushed_at_start = Gsn::ZERO;
        st.wrote = true;
    }

    fn page_log(&self) -> &dyn PageLog {
        self
    }

    fn end_undo(&mut self, txn: u64) -> Result<()> {
        self.state.borrow_mut().compensating = false;
        self.append_end(txn).map(|_| ())
    }

    fn flush(&mut self) -> Result<()> {
        self.partition.wait_durable(self.partition.appended())
    }
}
