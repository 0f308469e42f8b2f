//! Recovery by value-log replay (seed 002 §4.3): read the pepoch file's
//! bounds, scan every logger's files of every generation on several
//! threads (newest files first), keep the entries at or below their
//! generation's bound, and per key keep the entry with the largest TID;
//! then apply the catalog changes in log order and the winners onto the
//! base (the data file as the last clean close left it): a key is written
//! if absent or older, removed by a tombstone that wins.
//!
//! Why per key the largest TID, not log order: entries of one epoch sit in
//! several loggers' files in no common order, and Silo's TIDs order every
//! two writes of one key (a later writer's TID exceeds every TID it
//! overwrote). Tombstones are kept among the winners until the end, so an
//! older write of a deleted key cannot come back, whichever file is read
//! first.
//!
//! With an installed checkpoint (`checkpoint::load`) the base is the
//! checkpoint: entries of epochs below its el are skipped (what they wrote
//! is in it, or overwritten in it; their segments may be pruned, so a
//! tombstone among them may be gone), and so are the catalog changes
//! logged before its catalog was noted.
//!
//! Invariant: only entries of epochs at or below their generation's bound
//! are applied, each whole (an entry is one frame), so the state is the
//! serial order's prefix up to a persistent epoch.

use super::entry::{Entries, Entry};
use super::pepoch::PepochState;
use crate::btree::{BTree, NoLog};
use crate::buffer::BufferPool;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::ids::{LogPos, Tid};
use crate::io::{OpenMode, Storage};
use crate::logstore::scan::{self, ScanEnd};
use crate::logstore::segment::{self, list_segments};
use crate::parallel::on_threads;
use crate::persist::{CatalogChange, SchemeKind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) use crate::persist::resident::{generation_dir, generations};

/// Logger `l`'s stream directory in a generation directory.
pub(super) fn logger_dir(generation: &Path, l: usize) -> PathBuf {
    generation.join(format!("l{l}"))
}

/// One segment file to replay.
struct SegmentFile {
    generation: u64,
    logger: u32,
    start: LogPos,
    path: PathBuf,
    bound: u64,
}

/// What an installed checkpoint already holds: entries of epochs below
/// `el`, and catalog changes logged before `catalog_from` (generation,
/// logger-0 position).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Floor {
    pub el: u64,
    pub catalog_from: (u64, u64),
}

/// A key's winning entry so far.
type Winner = (Tid, Option<Vec<u8>>);
type Winners = HashMap<(u32, Vec<u8>), Winner>;

/// What the scan of the logs found.
#[derive(Default)]
pub(super) struct Scanned {
    /// Catalog changes at or below their bound, by (generation, logger,
    /// position): DDL is logged through one logger, in order.
    catalog: Vec<((u64, u32, u64), CatalogChange)>,
    winners: Winners,
    pub segments: usize,
    pub entries: u64,
    pub skipped: u64,
    pub bytes: u64,
    pub torn_tails: usize,
    /// Entries below the installed checkpoint's floor.
    pub below_floor: u64,
    /// The largest epoch in any entry, kept or not.
    pub max_epoch: u64,
    pub scan_time: Duration,
}

fn keep(winners: &mut Winners, table: u32, key: &[u8], tid: Tid, value: Option<&[u8]>) {
    match winners.get_mut(&(table, key.to_vec())) {
        Some(w) if w.0 >= tid => {}
        Some(w) => *w = (tid, value.map(<[u8]>::to_vec)),
        None => {
            winners.insert((table, key.to_vec()), (tid, value.map(<[u8]>::to_vec)));
        }
    }
}

fn scan_file(
    storage: &dyn Storage,
    f: &SegmentFile,
    floor: Floor,
    out: &mut Scanned,
) -> Result<()> {
    let file = storage.open(&f.path, OpenMode::ReadOnly)?;
    let mut whole = vec![0u8; file.len()? as usize];
    file.read_at(&mut whole, 0)?;
    drop(file);
    out.segments += 1;
    match segment::decode_header(&f.path, &whole, SchemeKind::Silor)? {
        segment::Header::Valid { stream, start } if stream == f.logger && start == f.start => {}
        segment::Header::Valid { stream, start } => {
            return Err(Error::Corruption {
                path: f.path.clone(),
                offset: 0,
                detail: format!(
                    "segment header names logger {stream} at {start}, the file is logger {} at {}",
                    f.logger, f.start
                ),
            })
        }
        // Synced with the first entries: nothing here was durable.
        segment::Header::Torn => return Ok(()),
    }
    let buf = &whole[segment::HEADER_SIZE as usize..];
    let scanned = scan::scan::<Entries>(buf, f.start);
    if let Some(e) = scanned.end.to_error(&f.path, segment::HEADER_SIZE) {
        return Err(e);
    }
    if matches!(scanned.end, ScanEnd::TornTail { .. }) {
        // Entries after a torn write are of epochs beyond pepoch (see
        // `loggers`): the bound drops them anyway.
        out.torn_tails += 1;
    }
    out.bytes += scanned.valid_len;
    for (offset, entry) in scanned.records {
        let epoch = entry.epoch();
        out.max_epoch = out.max_epoch.max(epoch);
        if epoch > f.bound {
            out.skipped += 1;
            continue;
        }
        let below = match &entry {
            Entry::Commit { .. } => epoch < floor.el,
            Entry::Catalog { .. } => {
                (f.generation, f.logger, f.start.get() + offset) < (floor.catalog_from.0, 0, floor.catalog_from.1)
            }
        };
        if below {
            out.below_floor += 1;
            continue;
        }
        out.entries += 1;
        match entry {
            Entry::Commit { tid, writes } => {
                for w in writes {
                    keep(&mut out.winners, w.table, w.key, tid, w.value);
                }
            }
            Entry::Catalog { change, .. } => out.catalog.push((
                (f.generation, f.logger, f.start.get() + offset),
                change,
            )),
        }
    }
    Ok(())
}

/// Scan the logs of every generation `state` knows, on `threads` threads.
pub(super) fn scan_logs(
    storage: &Arc<dyn Storage>,
    silor: &Path,
    state: &PepochState,
    floor: Floor,
    threads: usize,
) -> Result<Scanned> {
    let began = Instant::now();
    let mut files = Vec::new();
    for (generation, dir) in generations(storage.as_ref(), silor)? {
        let Some(bound) = state.bound(generation) else {
            continue;
        };
        for logger_path in storage.list_dir(&dir)? {
            let Some(logger) = logger_path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix('l'))
                .and_then(|d| d.parse::<u32>().ok())
            else {
                continue;
            };
            for (start, path) in list_segments(storage.as_ref(), &logger_path)? {
                files.push(SegmentFile {
                    generation,
                    logger,
                    start,
                    path,
                    bound,
                });
            }
        }
    }
    // Newest files first (SiloR §4.3): with largest-TID-wins the order
    // does not change the result, only how often a winner is replaced.
    files.sort_by_key(|f| std::cmp::Reverse((f.generation, f.start)));
    let threads = threads.clamp(1, files.len().max(1));
    let parts = on_threads("log scan", 0..threads, |_, t| {
        let mut out = Scanned::default();
        for f in files.iter().skip(t).step_by(threads) {
            scan_file(storage.as_ref(), f, floor, &mut out)?;
        }
        Ok(out)
    })?;
    let mut all = Scanned::default();
    for part in parts {
        all.segments += part.segments;
        all.entries += part.entries;
        all.skipped += part.skipped;
        all.below_floor += part.below_floor;
        all.bytes += part.bytes;
        all.torn_tails += part.torn_tails;
        all.max_epoch = all.max_epoch.max(part.max_epoch);
        all.catalog.extend(part.catalog);
        for ((table, key), (tid, value)) in part.winners {
            keep(&mut all.winners, table, &key, tid, value.as_deref());
        }
    }
    all.catalog.sort_by_key(|(at, _)| *at);
    all.scan_time = began.elapsed();
    Ok(all)
}

/// What the replay applied.
#[derive(Debug, Default, Clone)]
pub(super) struct Replayed {
    /// Indexes the replayed catalog changes created: their first entries
    /// came from the extractor, so they are rebuilt when it is bound.
    pub created_indexes: Vec<String>,
    pub keys_written: u64,
    pub keys_removed: u64,
    pub time: Duration,
}

fn apply_catalog(pool: &BufferPool, catalog: &mut Catalog, change: &CatalogChange) -> Result<()> {
    let log = NoLog;
    match change {
        CatalogChange::CreateTable { name, id } => {
            catalog.add_table(pool, &log, name, Some(*id))?;
        }
        CatalogChange::CreateIndex { name, id, table } => {
            let table = catalog.tables.get(table).cloned().ok_or_else(|| Error::Internal {
                what: format!("the value log creates index {name:?} on missing table {table:?}"),
            })?;
            catalog.add_index(pool, &log, name, &table, None, Some(*id))?;
        }
        CatalogChange::DropTable { name } => catalog.remove_table(pool, &log, name)?,
        CatalogChange::DropIndex { name } => catalog.remove_index(pool, &log, name)?,
    }
    Ok(())
}

/// Apply what the scan kept onto the trees in `pool`, on `threads`
/// threads.
pub(super) fn replay(pool: &BufferPool, scanned: Scanned, threads: usize) -> Result<Replayed> {
    let began = Instant::now();
    let mut catalog = Catalog::load(pool)?;
    let mut created_indexes = Vec::new();
    for (_, change) in &scanned.catalog {
        apply_catalog(pool, &mut catalog, change)?;
        match change {
            CatalogChange::CreateIndex { name, .. } => created_indexes.push(name.clone()),
            CatalogChange::DropIndex { name } => created_indexes.retain(|n| n != name),
            CatalogChange::DropTable { .. } => {
                created_indexes.retain(|n| catalog.indexes.contains_key(n))
            }
            CatalogChange::CreateTable { .. } => {}
        }
    }
    // Index entries are logged as writes to the index's id.
    let trees: HashMap<u32, BTree> = catalog
        .tables
        .values()
        .map(|t| (t.id, t.tree))
        .chain(catalog.indexes.values().map(|i| (i.id, i.tree)))
        .collect();
    let winners: Vec<_> = scanned.winners.into_iter().collect();
    let threads = threads.clamp(1, winners.len().max(1));
    let chunk = winners.len().div_ceil(threads).max(1);
    let counts = on_threads("log replay", winners.chunks(chunk), |_, part| {
            let (mut written, mut removed) = (0, 0);
            for ((table, key), (tid, value)) in part {
                // A table dropped later in the log.
                let Some(tree) = trees.get(table) else {
                    continue;
                };
                let (current, hint) = tree.get(pool, key, None)?;
                if current.as_ref().is_some_and(|(t, _)| t >= tid) {
                    continue;
                }
                match (value, current) {
                    (Some(v), Some(_)) => {
                        tree.update(pool, &NoLog, key, *tid, v, hint)?;
                        written += 1;
                    }
                    (Some(v), None) => {
                        tree.insert(pool, &NoLog, key, *tid, v, hint)?;
                        written += 1;
                    }
                    (None, Some(_)) => {
                        tree.remove(pool, &NoLog, key, hint)?;
                        removed += 1;
                    }
                    (None, None) => {}
                }
            }
            Ok((written, removed))
    })?;
    let mut out = Replayed {
        created_indexes,
        ..Replayed::default()
    };
    for (w, r) in counts {
        out.keys_written += w;
        out.keys_removed += r;
    }
    out.time = began.elapsed();
    Ok(out)
}
