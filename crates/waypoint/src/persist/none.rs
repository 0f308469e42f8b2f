//! The `none` scheme: no log, no checkpoints, no recovery. Changes are
//! durable only after a clean close writes every page (seed 000 Table 1's
//! first row: what a transaction costs without logging).
//!
//! Pages are written freely ([`PageWritePolicy::WriteFreely`]): at
//! eviction and at the clean close, with no log to order them.
//!
//! Invariant: a database under this scheme is consistent on disk only
//! after a clean close; a crash may lose or tear everything since the
//! last one, and the superblock's unclean mark says so to the next open.

use super::scheme::{OpenContext, Opening, PersistenceStats, Prepared, Scheme, SchemeKind};
use super::{NoSessionLog, SessionLog};
use crate::buffer::{BufferPool, PageWritePolicy};
use crate::error::Result;
use crate::wal::recovery::RecoveryReport;
use std::sync::Arc;

/// Opening the `none` scheme: nothing to check, prepare or recover.
pub(crate) struct NoneOpening;

impl Opening for NoneOpening {
    fn prepare(&mut self, _ctx: &OpenContext<'_>) -> Result<Prepared> {
        Ok(Prepared {
            log_required: false,
            page_writes: PageWritePolicy::WriteFreely,
        })
    }

    fn recover(
        self: Box<Self>,
        ctx: &OpenContext<'_>,
        _pool: &Arc<BufferPool>,
        _repaired_torn_pages: usize,
    ) -> Result<Arc<dyn Scheme>> {
        Ok(Arc::new(NoneScheme { floor: ctx.floor }))
    }
}

/// The scheme without a log.
#[derive(Debug, Default)]
pub struct NoneScheme {
    /// The log floor the database was opened with. Nothing is logged, so
    /// it is still the floor at a clean close: every GSN a page carries is
    /// at or below it. Writing 0 instead would let a later open under a
    /// scheme with a log start from a floor below the pages' GSNs.
    floor: u64,
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

    fn seal_for_clean_close(&self) -> Result<u64> {
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
