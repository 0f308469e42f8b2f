//! Taking a checkpoint (seed 002 §4.2): under the catalog lock, note el
//! (`Loggers::low_epoch`), the catalog and the catalog log's position;
//! write the catalog file; then the checkpointers walk the key ranges of
//! every table and index (`LOAD_PARTS` ranges at least, a file each, so
//! that recovery loads them on several threads) in batches, each batch an ordinary shared-latch
//! scan (`BTree::scan`) under the shared side of the quiesce lock (so a
//! tree is never destroyed under it by a `drop_table`; writers take the
//! same side and are never stopped); eh is the epoch when the last walker
//! ended.
//!
//! Why the catalog position: catalog changes are logged through logger 0
//! under the catalog lock, so the ones logged before the snapshot sit
//! below the position noted with it and are in the checkpoint's catalog;
//! recovery replays only those at or after it (epochs alone cannot tell,
//! a change may share el's epoch).
//!
//! Invariant: every row written is a committed version with the TID that
//! wrote it (placeholders are skipped), each key in at most one file.

use super::{checkpoint_dir, part_file, CheckpointStage, Checkpointer, CATALOG_FILE, LOAD_PARTS};
use crate::btree::BTree;
use crate::error::Result;
use crate::parallel::on_threads;
use crate::ids::Tid;
use crate::persist::resident::create_dir;
use crate::persist::resident::snapshot_file::SnapshotWriter;
use crate::persist::SchemeKind;
use crate::txn::shared::DbShared;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Rows a walker copies per scan (under one shared quiesce lock).
const BATCH_ROWS: usize = 256;
/// Bytes a walker copies per scan, at most about.
const BATCH_BYTES: usize = 1 << 20;

/// A checkpoint written and synced, not installed.
#[derive(Debug, Clone)]
pub(super) struct Taken {
    pub id: u64,
    pub el: u64,
    pub eh: u64,
    pub bytes: u64,
    pub rows: u64,
    /// `Loggers::install_rollbacks` before the walk began.
    pub rollbacks: u64,
}

/// The meta record of the catalog file: the generation and logger-0
/// position the catalog was noted at, and el.
/// The meta record: the generation and logger-0 position the catalog was
/// copied at, el, and the catalog's next id (ids are never given twice:
/// a table created and dropped since the last clean close has its id only
/// here and in the logs).
pub(crate) fn encode_meta(generation: u64, catalog_pos: u64, el: u64, next_id: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    for v in [generation, catalog_pos, el, u64::from(next_id)] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// (generation, catalog position, el, next id).
pub(crate) fn decode_meta(bytes: &[u8]) -> Option<(u64, u64, u64, u32)> {
    if bytes.len() != 32 {
        return None;
    }
    let at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
    Some((at(0), at(8), at(16), u32::try_from(at(24)).ok()?))
}

/// A tree to walk: its id, the tree and whether it was dropped since.
struct Walked {
    id: u32,
    tree: BTree,
    dropped: Box<dyn Fn() -> bool + Send + Sync>,
}

pub(super) fn take(ck: &Checkpointer, db: &DbShared, id: u64) -> Result<Option<Taken>> {
    let storage = ck.storage.as_ref();
    let dir = checkpoint_dir(&ck.dir, id);
    create_dir(storage, &ck.dir.join(super::CHECKPOINTS_DIR))?;
    create_dir(storage, &dir)?;
    // Before any row is read: a commit rolled back after its install
    // began from here on may have had a value walked (`install`).
    let rollbacks = ck.loggers.install_rollbacks.load(Ordering::SeqCst);
    // Catalog, el and the catalog's log position, at one instant.
    let catalog = db.catalog.lock();
    let el = ck.loggers.low_epoch();
    let generation = ck.loggers.generation();
    let catalog_pos = ck.loggers.loggers[0].stream.appended().get();
    let next_id = catalog.next_id;
    let mut w = SnapshotWriter::create(storage, &dir.join(CATALOG_FILE), SchemeKind::Silor, 0)?;
    let mut trees = Vec::new();
    for t in catalog.tables.values() {
        w.table(t.id, &t.name)?;
        let info = Arc::clone(t);
        trees.push(Walked {
            id: t.id,
            tree: t.tree,
            dropped: Box::new(move || info.dropped.load(Ordering::Acquire)),
        });
    }
    for i in catalog.indexes.values() {
        w.index(i.id, &i.name, &i.table.name, i.stale.load(Ordering::Acquire))?;
        let info = Arc::clone(i);
        trees.push(Walked {
            id: i.id,
            tree: i.tree,
            dropped: Box::new(move || info.dropped.load(Ordering::Acquire)),
        });
    }
    drop(catalog);
    w.meta(&encode_meta(generation, catalog_pos, el, next_id))?;
    let mut bytes = w.finish()?.bytes;
    let threads = ck.options.checkpointers;
    let parts = threads.max(LOAD_PARTS);
    // Each tree's key space in `parts` ranges.
    let mut splits = Vec::with_capacity(trees.len());
    {
        let _q = db.quiesce.read();
        for t in &trees {
            splits.push(if (t.dropped)() {
                Vec::new()
            } else {
                t.tree.split_keys(&db.pool, parts)?
            });
        }
    }
    // Walker `t` writes parts t, t + threads, ...: neighbouring ranges on
    // different threads, so a skewed table shares its load between them.
    let results = on_threads("checkpoint walk", 0..threads, |_, thread| {
        let mut written = (0, 0);
        for part in (thread..parts).step_by(threads) {
            let Some((b, n)) = walk_part(ck, db, &trees, &splits, part, &part_file(&dir, part))?
            else {
                return Ok(None);
            };
            written = (written.0 + b, written.1 + n);
        }
        Ok(Some(written))
    })?;
    let eh = ck.loggers.clock.current();
    let mut rows = 0;
    for r in results {
        match r {
            Some((b, n)) => {
                bytes += b;
                rows += n;
            }
            None => return Ok(None),
        }
    }
    // The files' names, durable.
    storage.sync_dir(&dir)?;
    debug_assert!(el <= eh, "el {el} above eh {eh}");
    Ok(Some(Taken {
        id,
        el,
        eh,
        bytes,
        rows,
        rollbacks,
    }))
}

/// A key range: lower bound inclusive, upper exclusive (`None`: open).
type Range<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Range `part` of `splits`.
fn range(splits: &[Vec<u8>], part: usize) -> Option<Range<'_>> {
    if part > splits.len() {
        return None;
    }
    let lo = part.checked_sub(1).map(|i| splits[i].as_slice());
    let hi = splits.get(part).map(Vec::as_slice);
    Some((lo, hi))
}

/// Walk range `part` of every tree into `path`; `None` if stopped.
fn walk_part(
    ck: &Checkpointer,
    db: &DbShared,
    trees: &[Walked],
    splits: &[Vec<Vec<u8>>],
    part: usize,
    path: &std::path::Path,
) -> Result<Option<(u64, u64)>> {
    let mut w = SnapshotWriter::create(ck.storage.as_ref(), path, SchemeKind::Silor, part as u32)?;
    let mut batch: Vec<(Vec<u8>, Tid, Vec<u8>)> = Vec::with_capacity(BATCH_ROWS);
    let mut rows = 0u64;
    for (t, split) in trees.iter().zip(splits) {
        let Some((lo, hi)) = range(split, part) else {
            continue;
        };
        // The last key copied: the next batch starts after it.
        let mut after: Option<Vec<u8>> = None;
        loop {
            if ck.stopped() {
                return Ok(None);
            }
            batch.clear();
            let mut more = false;
            let mut skipped: Option<Vec<u8>> = None;
            {
                let _q = db.quiesce.read();
                if (t.dropped)() {
                    // Dropped meanwhile: its rows are moot (recovery
                    // replays the drop), and its pages may be gone.
                    break;
                }
                let from = after.take();
                let lower = match (&from, lo) {
                    (Some(k), _) => Bound::Excluded(k.as_slice()),
                    (None, Some(l)) => Bound::Included(l),
                    (None, None) => Bound::Unbounded,
                };
                let upper = hi.map_or(Bound::Unbounded, Bound::Excluded);
                let mut size = 0;
                t.tree.scan(&db.pool, lower, upper, false, &mut |k, tid, v| {
                    if batch.len() >= BATCH_ROWS || size >= BATCH_BYTES {
                        more = true;
                        return false;
                    }
                    // A commit's placeholder: its commit has an epoch ≥ el
                    // and is in the log.
                    if !tid.is_placeholder() {
                        size += k.len() + v.len();
                        batch.push((k.to_vec(), tid, v.to_vec()));
                    } else {
                        skipped = Some(k.to_vec());
                    }
                    true
                })?;
                after = from;
            }
            if let Some(k) = skipped.take() {
                after = Some(k);
            }
            for (k, tid, v) in &batch {
                w.row(t.id, *tid, k, v)?;
            }
            rows += batch.len() as u64;
            if let Some((k, _, _)) = batch.last() {
                if after.as_ref().is_none_or(|a| a < k) {
                    after = Some(k.clone());
                }
            }
            ck.stage(CheckpointStage::Batch { part, rows });
            if !more {
                break;
            }
        }
    }
    let written = w.finish()?;
    Ok(Some((written.bytes, rows)))
}
