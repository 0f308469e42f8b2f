//! Installing a checkpoint and pruning what it replaces (seed 002 §4.2):
//! wait until pepoch ≥ eh (every commit the walk may have seen is then
//! durable in the logs, so the checkpoint holds no effect a crash could
//! take back), write the pepoch file naming it (one atomic write, see
//! `pepoch`), and only then delete: log segments whose newest epoch (the
//! stream's mark) is below el, older checkpoints, older log generations.
//!
//! Invariant: nothing the installed base needs is deleted before the file
//! naming it is durable, and nothing a recovery from it needs is deleted
//! after: a log entry of an epoch ≥ el sits in a segment whose newest
//! epoch is ≥ el.

use super::walk::Taken;
use super::Checkpointer;
use crate::error::Result;
use crate::io::Storage;
use crate::persist::resident::{
    dir_bytes, generation_dir, generations, older_generations_bytes, remove_numbered_but,
    remove_synced,
};
use crate::silor::pepoch::Installed;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Install `taken` once pepoch ≥ eh; `None` if stopped first.
pub(super) fn install(ck: &Checkpointer, taken: &Taken) -> Result<Option<Installed>> {
    while !ck
        .loggers
        .wait_epoch_for(taken.eh, Duration::from_millis(50))
    {
        ck.loggers.check_healthy()?;
        if ck.stopped() {
            return Ok(None);
        }
    }
    // pepoch ≥ eh: every commit that was installing during the walk has
    // ended (its epoch bound, at most eh, is withdrawn only after a
    // rollback counts itself). One rolled back may have had a value
    // walked that never committed: this checkpoint cannot be trusted.
    if ck.loggers.install_rollbacks.load(Ordering::SeqCst) != taken.rollbacks {
        ck.counters.lock().abandoned += 1;
        tracing::debug!(id = taken.id, "silor checkpoint abandoned: a commit rolled back after installing during the walk");
        return Ok(None);
    }
    let installed = Installed {
        id: taken.id,
        el: taken.el,
        eh: taken.eh,
    };
    ck.loggers.install_checkpoint(installed)?;
    let mut c = ck.counters.lock();
    c.installed += 1;
    c.bytes += taken.bytes;
    c.last_bytes = taken.bytes;
    c.last_rows = taken.rows;
    c.last_el = taken.el;
    c.last_eh = taken.eh;
    drop(c);
    tracing::debug!(id = taken.id, el = taken.el, eh = taken.eh, bytes = taken.bytes, "silor checkpoint installed");
    Ok(Some(installed))
}

/// After `installed` is durable: delete what it replaces.
pub(super) fn prune(ck: &Checkpointer, installed: &Installed) -> Result<()> {
    let storage = ck.storage.as_ref();
    // The broken variant keeps only what is newer than eh: entries the
    // walk missed, of epochs in [el, eh], go with it.
    let below = if ck.broken_prune.load(Ordering::Relaxed) {
        installed.eh + 1
    } else {
        installed.el
    };
    let mut deleted = 0;
    for l in &ck.loggers.loggers {
        deleted += l.stream.prune_below(below)?;
    }
    // Older generations: the pepoch file no longer names them.
    let current = ck.loggers.generation();
    for (g, path) in generations(storage, &ck.dir)? {
        if g < current {
            deleted += dir_bytes(storage, &path);
            remove_synced(storage, &path)?;
        }
    }
    ck.sealed_log_bytes.store(0, Ordering::Relaxed);
    debug_assert!(storage.exists(&generation_dir(&ck.dir, current)));
    remove_other_checkpoints(storage, &ck.dir, Some(installed.id))?;
    ck.counters.lock().log_bytes_deleted += deleted;
    Ok(())
}

/// Bytes of the generations older than the one being written.
pub(super) fn sealed_generation_bytes(ck: &Checkpointer) -> Result<u64> {
    older_generations_bytes(ck.storage.as_ref(), &ck.dir, ck.loggers.generation())
}

/// Remove every checkpoint directory but `keep`'s.
pub(crate) fn remove_other_checkpoints(
    storage: &dyn Storage,
    silor: &Path,
    keep: Option<u64>,
) -> Result<()> {
    remove_numbered_but(storage, &silor.join(super::CHECKPOINTS_DIR), 'c', keep)
}

