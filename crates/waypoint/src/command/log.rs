//! The command log while the database runs (seed 001 §III-A): one
//! `logstore` stream, appended by whichever session commits a call (its
//! partition held, see `procedure::order`), acknowledged once the stream
//! is durable past the record: group commit by the stream's writer, or
//! by a blocking committer syncing itself. Each call's record carries
//! whether it is a barrier of parallel replay, as the call decided
//! (`ProcedureCall::barrier`). While the open replays, a re-executed
//! commit's write-set digest is kept for its thread to check.
//!
//! Invariant: sequence numbers are given and appended under one lock, so
//! they grow with stream position; a commit that logged a call is
//! acknowledged only once the stream is durable past its record; while
//! the open replays the log nothing is appended.

use super::record;
use super::snapshot::Shadow;
use crate::btree::{NoLog, PageLog};
use crate::error::{Error, Result};
use crate::ids::{LogPos, Tid};
use crate::logstore::stream::Stream;
use crate::persist::{CatalogChange, CommitView, DurableWait, SchemeKind, SessionLog};
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

thread_local! {
    /// While replaying: the digest of the write set of the last commit
    /// re-executed on this thread, for `replay` to compare with the
    /// logged one. Per thread, since parallel replay commits on several
    /// at once and each checks its own call (a commit's hook runs on the
    /// committing thread).
    static REPLAYED_DIGEST: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Take the digest of the last commit re-executed on this thread (see
/// `REPLAYED_DIGEST`); `None` if none committed since the last take.
pub(super) fn take_replayed_digest() -> Option<u32> {
    REPLAYED_DIGEST.take()
}

pub(super) struct CommandLog {
    pub stream: Arc<Stream>,
    /// The last sequence number appended.
    sequence: Mutex<u64>,
    /// Set while the open re-executes the log: calls and catalog changes
    /// are already in it.
    pub replaying: AtomicBool,
    /// Log each call's write-set digest (`CommandOptions::digests`).
    digests: bool,
    pub calls: AtomicU64,
    pub catalog_changes: AtomicU64,
    /// Test-only: acknowledge without waiting for durability.
    #[cfg(feature = "testing")]
    pub broken_ack: AtomicBool,
}

impl CommandLog {
    pub fn new(stream: Arc<Stream>, last_sequence: u64, digests: bool) -> Self {
        CommandLog {
            stream,
            sequence: Mutex::new(last_sequence),
            replaying: AtomicBool::new(false),
            digests,
            calls: AtomicU64::new(0),
            catalog_changes: AtomicU64::new(0),
            #[cfg(feature = "testing")]
            broken_ack: AtomicBool::new(false),
        }
    }

    pub fn last_sequence(&self) -> u64 {
        *self.sequence.lock()
    }

    /// The last sequence number and the appended position, at one
    /// instant: a snapshot's point (with every partition and the catalog
    /// held, nothing appends anyway).
    pub fn point(&self) -> (u64, LogPos) {
        let sequence = self.sequence.lock();
        (*sequence, self.stream.appended())
    }

    /// Append a call's record; `request`: ask the writer to sync it (in
    /// the same acquisition of the stream's lock).
    fn append_call(
        &self,
        buf: &mut Vec<u8>,
        name: &str,
        params: &[u8],
        flags: record::CallFlags,
        request: bool,
    ) -> Result<LogPos> {
        let mut sequence = self.sequence.lock();
        let next = *sequence + 1;
        buf.clear();
        record::encode_call(buf, self.stream.durable(), next, name, params, flags);
        let end = if request {
            self.stream.append_frames_and_request(buf, 1, next)?
        } else {
            self.stream.append_frames(buf, 1, next)?
        };
        *sequence = next;
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(end)
    }

    fn append_catalog(
        &self,
        buf: &mut Vec<u8>,
        change: &CatalogChange,
        request: bool,
    ) -> Result<LogPos> {
        let sequence = self.sequence.lock();
        buf.clear();
        record::encode_catalog(buf, self.stream.durable(), change);
        let end = if request {
            self.stream.append_frames_and_request(buf, 1, *sequence)?
        } else {
            self.stream.append_frames(buf, 1, *sequence)?
        };
        self.catalog_changes.fetch_add(1, Ordering::Relaxed);
        Ok(end)
    }

    /// The broken variant's writes: a call is acknowledged with its
    /// record only in memory, and the next call makes everything appended
    /// so far durable before it appends its own. The log is written and
    /// synced once per call, as the correct scheme does (a crash planned
    /// at the n-th log write lands inside the run), and at every moment
    /// the last acknowledged call is not durable: what a crash loses does
    /// not hang on a writer thread's timing, only on the crash landing
    /// inside the run.
    fn sync_the_calls_before(&self) -> Result<()> {
        self.stream.sync_to(self.stream.appended())
    }

    #[cfg(feature = "testing")]
    fn acknowledges_early(&self) -> bool {
        self.broken_ack.load(Ordering::Relaxed)
    }

    #[cfg(not(feature = "testing"))]
    fn acknowledges_early(&self) -> bool {
        false
    }
}

pub(super) struct CommandSessionLog {
    log: Arc<CommandLog>,
    /// The pre-images of a snapshot in progress.
    shadow: Arc<Shadow>,
    /// Where the stream must be durable before the last commit is
    /// acknowledged.
    pending: Option<LogPos>,
    /// The next commit waits at once (`Transaction::commit`): it syncs the
    /// stream itself rather than waking the writer.
    waits: bool,
    buf: Vec<u8>,
    page_log: NoLog,
}

impl CommandSessionLog {
    pub fn new(log: Arc<CommandLog>, shadow: Arc<Shadow>) -> Self {
        CommandSessionLog {
            log,
            shadow,
            pending: None,
            waits: true,
            buf: Vec::new(),
            page_log: NoLog,
        }
    }

    /// Does the writer sync this session's records? A commit that waits
    /// at once syncs the stream itself. The request is counted, as a WAL
    /// partition's own commits are: the writer syncs once a batch of
    /// requests waits, or one has waited its patience, or the pacing
    /// interval ends. A lazy request (a group window, then the whole
    /// interval) held pipelined calls about 1.3 ms, and a worker's 128 in
    /// flight then capped it by Little's law (decision 030).
    fn requests_flush(&self) -> bool {
        // The broken variant syncs only at the next call (see
        // `sync_the_calls_before`): a request would have the writer sync
        // acknowledged calls early and hide what the tests must catch.
        !self.waits && !self.log.acknowledges_early()
    }
}

impl SessionLog for CommandSessionLog {
    fn page_log(&self) -> &dyn PageLog {
        // Pages are never logged: recovery runs the calls again.
        &self.page_log
    }

    fn before_install(&self, table: u32, key: &[u8], current: Option<(Tid, &[u8])>) {
        self.shadow.register(table, key, current);
    }

    fn on_commit(&mut self, commit: &CommitView<'_>) -> Result<()> {
        if self.log.replaying.load(Ordering::Acquire) {
            // Already logged; what it wrote this time is for replay to
            // check against the logged digest (cheap beside re-execution).
            REPLAYED_DIGEST.set(Some(record::write_set_digest(commit.writes())));
            return Ok(());
        }
        if commit.writes().is_empty() {
            // Read-only, or the end of a catalog change: acknowledged once
            // whatever it may have read is durable.
            self.pending = Some(self.log.stream.appended());
            return Ok(());
        }
        let Some(call) = commit.procedure() else {
            // Writes outside a call are refused before they are buffered.
            return Err(Error::ProcedureRequired {
                scheme: SchemeKind::Command,
            });
        };
        let digest = self
            .log
            .digests
            .then(|| record::write_set_digest(commit.writes()));
        let flags = record::CallFlags {
            digest,
            barrier: call.barrier,
        };
        if self.log.acknowledges_early() {
            self.log.sync_the_calls_before()?;
        }
        let request = self.requests_flush();
        let end = self
            .log
            .append_call(&mut self.buf, call.name, call.params, flags, request)?;
        self.pending = Some(end);
        Ok(())
    }

    fn on_catalog_change(&mut self, change: &CatalogChange) -> Result<()> {
        if self.log.replaying.load(Ordering::Acquire) {
            return Ok(());
        }
        let request = self.requests_flush();
        let end = self.log.append_catalog(&mut self.buf, change, request)?;
        self.pending = Some(end);
        Ok(())
    }

    fn set_commit_waits(&mut self, waits: bool) {
        self.waits = waits;
    }

    fn take_pending(&mut self) -> Option<Box<dyn DurableWait>> {
        let end = self.pending.take()?;
        if self.log.acknowledges_early() {
            return None;
        }
        (self.log.stream.durable() < end).then(|| {
            Box::new(StreamWait {
                log: Arc::clone(&self.log),
                end,
                sync_here: self.waits,
            }) as Box<dyn DurableWait>
        })
    }

    fn wait_durable(&mut self) -> Result<()> {
        match self.pending.take() {
            Some(_) if self.log.acknowledges_early() => Ok(()),
            Some(end) => self.log.stream.sync_to(end),
            None => Ok(()),
        }
    }
}

/// A commit waiting for the stream to be durable past its record.
struct StreamWait {
    log: Arc<CommandLog>,
    end: LogPos,
    /// A blocking commit syncs the stream itself (`Stream::sync_to`).
    sync_here: bool,
}

impl DurableWait for StreamWait {
    fn is_durable(&self) -> bool {
        self.log.stream.durable() >= self.end
    }

    fn wait(&self) -> Result<()> {
        if self.sync_here {
            self.log.stream.sync_to(self.end)
        } else {
            self.log.stream.wait_durable(self.end)
        }
    }
}
