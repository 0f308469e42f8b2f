//! A session's value log (seed 002 §4.1): at commit, one entry with the
//! TID and the write set goes to the buffer of the session's logger; the
//! commit is acknowledged once pepoch covers its epoch. Catalog changes
//! are logged as entries of their own through the system slot.
//!
//! Invariant: a session's `active` bound is published before its TID's
//! epoch is read and withdrawn only after its entry was appended (or the
//! transaction ended without one), which is what makes pepoch safe
//! (`loggers`).

use super::entry;
use super::loggers::{Logger, Loggers, IDLE};
use crate::btree::{NoLog, PageLog};
use crate::error::Result;
use crate::ids::Tid;
use crate::persist::{CatalogChange, CommitView, DurableWait, SessionLog};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub(super) struct SilorSessionLog {
    loggers: Arc<Loggers>,
    logger: usize,
    active: Arc<AtomicU64>,
    /// The epoch the last commit waits for (0: nothing).
    pending: u64,
    /// The broken variant's (`Loggers::acknowledges_early`): the epoch of
    /// the previous commit, which is what the next one waits for.
    previous: u64,
    buf: Vec<u8>,
    page_log: NoLog,
}

impl SilorSessionLog {
    pub fn new(loggers: Arc<Loggers>, logger: usize) -> Self {
        let active = loggers.register();
        SilorSessionLog {
            loggers,
            logger,
            active,
            pending: 0,
            previous: 0,
            buf: Vec::new(),
            page_log: NoLog,
        }
    }

    /// Append the entry in `self.buf` to the logger's stream, then
    /// withdraw the session's `active` bound. On failure the bound stays
    /// until `on_abort`: the commit's installed writes are rolled back
    /// first (`after_install_rolled_back`).
    fn append(&mut self, epoch: u64) -> Result<()> {
        let logger: &Logger = &self.loggers.loggers[self.logger];
        #[cfg(feature = "testing")]
        let injected = self.loggers.take_injected_append_failure();
        #[cfg(not(feature = "testing"))]
        let injected = Ok(());
        let result = injected
            .and_then(|()| self.loggers.check_healthy())
            .and_then(|()| {
                let mut mark = logger.mark.lock();
                *mark = (*mark).max(epoch);
                logger.stream.append_frames(&self.buf, 1, *mark).map(|_| ())
            });
        if result.is_ok() {
            self.active.store(IDLE, Ordering::Release);
        }
        self.buf.clear();
        result
    }

    /// The epoch a commit waits for: its own, or under the broken variant
    /// its predecessor's. Waiting one commit behind keeps the run's pace
    /// and I/O what they are (each commit still waits for an epoch), so a
    /// crash planned at the n-th log write lands inside the run as it
    /// does for the correct scheme, and it finds the last acknowledged
    /// commit not durable whenever that one opened a new epoch.
    fn epoch_to_wait_for(&mut self) -> u64 {
        let epoch = std::mem::take(&mut self.pending);
        if self.loggers.acknowledges_early() {
            return std::mem::replace(&mut self.previous, epoch);
        }
        epoch
    }
}

impl Drop for SilorSessionLog {
    fn drop(&mut self) {
        self.active.store(IDLE, Ordering::Release);
    }
}

impl SessionLog for SilorSessionLog {
    fn page_log(&self) -> &dyn PageLog {
        // Pages are never logged: recovery rebuilds them from values.
        &self.page_log
    }

    fn wants_index_writes(&self) -> bool {
        true
    }

    fn before_epoch(&self) {
        self.loggers.publish(&self.active);
    }

    fn on_abort(&mut self) {
        self.active.store(IDLE, Ordering::Release);
    }

    fn after_install_rolled_back(&mut self) {
        // Counted while the bound is still published: a checkpoint whose
        // install waits for pepoch ≥ eh sees the count (`install`).
        self.loggers.install_rollbacks.fetch_add(1, Ordering::SeqCst);
    }

    fn on_commit(&mut self, commit: &CommitView<'_>) -> Result<()> {
        let tid = commit.tid();
        if tid == Tid::ZERO {
            // Read-only (or the end of a catalog change): released once
            // what it read is durable.
            let read = commit.depends_on().iter().map(|t| t.epoch()).max();
            self.pending = self.pending.max(read.unwrap_or(0));
            return Ok(());
        }
        let watermark = self.loggers.loggers[self.logger].stream.durable();
        entry::encode_commit(
            &mut self.buf,
            watermark,
            tid,
            commit.writes(),
            commit.index_writes(),
        );
        self.append(tid.epoch())?;
        self.pending = tid.epoch();
        Ok(())
    }

    fn on_catalog_change(&mut self, change: &CatalogChange) -> Result<()> {
        self.loggers.publish(&self.active);
        let epoch = self.loggers.clock.current();
        let watermark = self.loggers.loggers[self.logger].stream.durable();
        entry::encode_catalog(&mut self.buf, watermark, epoch, change);
        if let Err(e) = self.append(epoch) {
            // Nothing to roll back: the change poisons the database.
            self.active.store(IDLE, Ordering::Release);
            return Err(e);
        }
        self.pending = self.pending.max(epoch);
        Ok(())
    }

    fn take_pending(&mut self) -> Option<Box<dyn DurableWait>> {
        let epoch = self.epoch_to_wait_for();
        (epoch > self.loggers.pepoch()).then(|| {
            Box::new(EpochWait {
                loggers: Arc::clone(&self.loggers),
                epoch,
            }) as Box<dyn DurableWait>
        })
    }

    fn wait_durable(&mut self) -> Result<()> {
        let epoch = self.epoch_to_wait_for();
        self.loggers.wait_epoch(epoch)
    }
}

/// A pipelined commit waiting for pepoch to cover its epoch.
struct EpochWait {
    loggers: Arc<Loggers>,
    epoch: u64,
}

impl DurableWait for EpochWait {
    fn is_durable(&self) -> bool {
        self.loggers.pepoch() >= self.epoch
    }

    fn wait(&self) -> Result<()> {
        self.loggers.wait_epoch(self.epoch)
    }
}
