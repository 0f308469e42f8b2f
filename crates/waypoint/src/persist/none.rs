//! The `none` scheme: no log, no checkpoints, no recovery. Changes are
//! durable only after a clean close writes every page (seed 000 Table 1's
//! first row: what a transaction costs without logging).
//!
//! Pages are written at eviction and at the clean close, with no log to
//! order them, behind [`MarkBeforeFirstWrite`]: the open leaves the
//! superblock as the last clean close wrote it, and the first page write
//! (or the close's free list) is preceded by a synced unclean mark. An
//! open that changed nothing writes nothing at its close either.
//!
//! Invariant: the data file is the last clean close's as long as the
//! superblock says clean; a crash after the first page write leaves it
//! marked unclean, and every later open refuses it
//! ([`Error::NotRecoverable`](crate::Error::NotRecoverable)) instead of
//! reading a torn mix of states. A crash before that loses the changes
//! since the last clean close, by design, and nothing else.

use super::scheme::{
    OpenContext, Opening, PersistenceStats, Prepared, Scheme, SchemeKind, UncleanMark,
};
use super::{NoSessionLog, SessionLog};
use crate::buffer::{BufferPool, FlushGate, PageWritePolicy};
use crate::db::Superblock;
use crate::error::Result;
use crate::ids::{Gsn, LogPos};
use crate::io::StorageFile;
use crate::wal::recovery::RecoveryReport;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Opening the `none` scheme: nothing to check or recover; `prepare`
/// makes the gate that marks the data file unclean.
#[derive(Default)]
pub(crate) struct NoneOpening {
    gate: Option<Arc<MarkBeforeFirstWrite>>,
}

impl Opening for NoneOpening {
    fn prepare(&mut self, ctx: &OpenContext<'_>) -> Result<Prepared> {
        let gate = Arc::new(MarkBeforeFirstWrite {
            file: Arc::clone(ctx.data_file),
            mark: ctx.superblock.unclean_mark(SchemeKind::None),
            marked: AtomicBool::new(false),
            writing: parking_lot::Mutex::new(()),
            #[cfg(feature = "testing")]
            broken: AtomicBool::new(false),
        });
        self.gate = Some(Arc::clone(&gate));
        Ok(Prepared {
            log_required: false,
            page_writes: PageWritePolicy::StealBehindGate(gate),
            unclean_mark: UncleanMark::BeforeFirstPageWrite,
        })
    }

    fn recover(
        self: Box<Self>,
        ctx: &OpenContext<'_>,
        _pool: &Arc<BufferPool>,
        _repaired_torn_pages: usize,
    ) -> Result<Arc<dyn Scheme>> {
        let gate = self
            .gate
            .ok_or_else(|| crate::Error::Internal {
                what: "the none scheme was recovered before it was prepared".into(),
            })?;
        Ok(Arc::new(NoneScheme {
            floor: ctx.floor,
            gate,
        }))
    }
}

/// The `none` scheme's page-write gate: no log to wait for, but the
/// first page write of an open waits for the superblock's unclean mark
/// to be durable.
pub(crate) struct MarkBeforeFirstWrite {
    file: Arc<dyn StorageFile>,
    mark: Superblock,
    /// Set once the mark is durable.
    marked: AtomicBool,
    /// Serialises the first writers.
    writing: parking_lot::Mutex<()>,
    /// Test-only: write pages without the mark (a broken variant the
    /// crash simulator must catch).
    #[cfg(feature = "testing")]
    broken: AtomicBool,
}

impl MarkBeforeFirstWrite {
    fn ensure_marked(&self) -> Result<()> {
        if self.marked.load(Ordering::Acquire) {
            return Ok(());
        }
        #[cfg(feature = "testing")]
        if self.broken.load(Ordering::Relaxed) {
            return Ok(());
        }
        let _writing = self.writing.lock();
        if !self.marked.load(Ordering::Acquire) {
            self.mark.write(self.file.as_ref())?;
            self.marked.store(true, Ordering::Release);
        }
        Ok(())
    }
}

impl FlushGate for MarkBeforeFirstWrite {
    fn ensure_durable(&self, _gsn: Gsn) -> Result<()> {
        self.ensure_marked()
    }

    fn is_durable_at(&self, _partition: u32, _end: LogPos) -> bool {
        // No log: nothing a page write could outrun.
        true
    }
}

/// The scheme without a log.
pub struct NoneScheme {
    /// The log floor the database was opened with. Nothing is logged, so
    /// it is still the floor at a clean close: every GSN a page carries is
    /// at or below it. Writing 0 instead would let a later open under a
    /// scheme with a log start from a floor below the pages' GSNs.
    floor: Gsn,
    gate: Arc<MarkBeforeFirstWrite>,
}

impl NoneScheme {
    /// Write pages without the unclean mark first: a broken variant of
    /// this scheme, which the crash simulator must catch (`testing`
    /// feature only).
    #[cfg(feature = "testing")]
    pub fn set_broken_unclean_mark_for_tests(&self, broken: bool) {
        self.gate.broken.store(broken, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for NoneScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoneScheme")
            .field("floor", &self.floor)
            .field("marked", &self.gate.marked.load(Ordering::Relaxed))
            .finish()
    }
}

impl Scheme for NoneScheme {
    fn kind(&self) -> SchemeKind {
        SchemeKind::None
    }

    fn session_log(&self, _slot: u16) -> Result<Box<dyn SessionLog>> {
        Ok(Box::new(NoSessionLog::default()))
    }

    fn check_writable(&self) -> Result<()> {
        Ok(())
    }

    fn recovery_report(&self) -> Option<&RecoveryReport> {
        None
    }

    fn stop_services(&self) {}

    fn data_file_untouched(&self) -> bool {
        // A change dirties a page (an allocation or a free too), and a
        // dirty page is written, behind the mark, before this is asked.
        !self.gate.marked.load(Ordering::Acquire)
    }

    fn seal_for_clean_close(&self) -> Result<Gsn> {
        // The close writes the free list into free pages next: the
        // superblock must not still call the old chain valid.
        self.gate.ensure_marked()?;
        Ok(self.floor)
    }

    fn remove_log_after_clean_close(&self) -> Result<()> {
        Ok(())
    }

    fn shutdown(&self) {}

    fn stats(&self) -> PersistenceStats {
        PersistenceStats {
            scheme: SchemeKind::None,
            ..PersistenceStats::default()
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
