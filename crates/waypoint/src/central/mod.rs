//! The central-log schemes, seed 000 §4's baselines: `aries`, one log for
//! every session, each record given the next LSN and appended under one
//! log latch. What is the per-worker WAL's is reused, not copied: the
//! record format (`wal::record`), the log stream (`logstore::stream`
//! through `wal::partition`), the commit protocols' waits (the stream's
//! writer batches whatever waits: group commit), the checkpointer, and
//! recovery (`wal::recovery`: on one partition, one analysis pass, redo in
//! LSN order from the checkpoint's floor, undo of losers with
//! compensation records). The log manager runs in central mode
//! (`wal::log::Partitioning::Central`): every session slot maps to
//! partition 0, and the LSN is that partition's GSN. This folder holds
//! only what is the central log's own: its options, its latch, the open
//! that puts them together, and `consolidation`, the `aether` scheme's
//! consolidation array (Johnson et al., PVLDB 2010: only a group's leader
//! takes the latch, members fill their records in outside it, and commits
//! are flushed by the log's writer, never by their session;
//! docs/decisions/027).
//!
//! Invariant: records are in the log in LSN order (reserved, and for
//! `aries` appended, under [`LogLatch`]); a commit is acknowledged once
//! the log is durable up to its commit record, which covers every record
//! it depends on.

mod consolidation;
mod latch;
mod options;

pub use consolidation::{Consolidation, ConsolidationStats, Share};
pub use latch::{LatchStats, LogLatch};
pub use options::CentralOptions;

use crate::error::Result;
use crate::persist::{OpenContext, Opening, SchemeKind};
use crate::wal::log::Partitioning;
use std::sync::Arc;

/// Check the central log of the database being opened (reads only) and
/// return its opening: the per-worker scheme's, over one partition shared
/// under a new latch, tagged `scheme`.
pub(crate) fn open(
    ctx: &OpenContext<'_>,
    scheme: SchemeKind,
    options: &CentralOptions,
) -> Result<Box<dyn Opening>> {
    crate::wal::scheme::open(
        ctx,
        &options.log,
        Partitioning::Central {
            scheme,
            latch: Arc::new(LogLatch::default()),
            consolidation: (scheme == SchemeKind::Aether).then(|| Arc::new(Consolidation::default())),
        },
    )
}
