//! Loading a snapshot into empty trees at recovery, for every
//! memory-resident scheme that writes snapshot files (`silor`'s fuzzy
//! checkpoints, seed 002 §4.3; `command`'s transaction-consistent
//! snapshots, seed 001 §II-C1 and §III-B). The snapshot, not the data file
//! of the last clean close, is then the base the log replays onto: every
//! table and index the data file holds is dropped first (its pages freed in
//! memory; the data file is not written until the next clean close), the
//! snapshot's catalog is created with its ids, and the part files are
//! loaded on up to `Options::recovery_threads` threads, each taking the
//! next file not yet taken (the writers cut a snapshot into more files
//! than they have threads for this: `silor::checkpoint::walk`).
//!
//! Why empty tables rather than a merge into the data file's trees: a key
//! deleted since the last clean close is in the data file and not in the
//! snapshot, and what deleted it may be in a pruned log segment; merging
//! would bring it back.
//!
//! Invariant: after loading, the trees hold exactly the snapshot's rows
//! with their TIDs, under the snapshot's catalog.

use super::snapshot_file::{self, Record};
use crate::btree::{BTree, NoLog};
use crate::buffer::BufferPool;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::parallel::taking_turns;
use crate::persist::SchemeKind;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A snapshot's catalog file, read.
#[derive(Debug, Clone, Default)]
pub(crate) struct SnapshotCatalog {
    pub tables: Vec<(u32, String)>,
    /// (id, name, table, stale).
    pub indexes: Vec<(u32, String, String, bool)>,
    /// The scheme's meta record, if any.
    pub meta: Option<Vec<u8>>,
    /// Part files per table id, where the catalog says (else one).
    pub parts: HashMap<u32, u32>,
    pub bytes: u64,
}

/// Read the catalog file at `path` (tables, indexes, the meta record).
pub(crate) fn read_catalog(
    storage: &dyn Storage,
    path: &Path,
    scheme: SchemeKind,
) -> Result<SnapshotCatalog> {
    let mut out = SnapshotCatalog::default();
    let read = snapshot_file::read(storage, path, scheme, &mut |r| {
        match r {
            Record::Table { id, name } => out.tables.push((id, name)),
            Record::Index {
                id,
                name,
                table,
                stale,
            } => out.indexes.push((id, name, table, stale)),
            Record::Meta(bytes) => out.meta = Some(bytes.to_vec()),
            Record::Parts { table, parts } => {
                out.parts.insert(table, parts);
            }
            Record::Row { .. } | Record::End { .. } => {}
        }
        Ok(())
    })?;
    out.bytes = read.bytes;
    Ok(out)
}

/// What loading did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    pub rows: u64,
    /// Bytes of the part files.
    pub bytes: u64,
    /// Indexes whose entries may not match their table (the snapshot
    /// says so, or wrote none).
    pub stale: Vec<String>,
}

/// Replace the trees in `pool` by the snapshot's: `catalog` (read from
/// `catalog_path`, `next_id` the catalog's next id when it was taken)
/// and its rows in `parts`, on up to `threads` threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn load(
    storage: &Arc<dyn Storage>,
    pool: &BufferPool,
    scheme: SchemeKind,
    catalog_path: &Path,
    snapshot: &SnapshotCatalog,
    next_id: u32,
    parts: &[PathBuf],
    threads: usize,
) -> Result<Loaded> {
    let log = NoLog;
    let mut catalog = Catalog::load(pool)?;
    let names: Vec<String> = catalog.tables.keys().cloned().collect();
    for name in names {
        catalog.remove_table(pool, &log, &name)?;
    }
    let mut trees: HashMap<u32, BTree> = HashMap::new();
    for (id, name) in &snapshot.tables {
        let t = catalog.add_table(pool, &log, name, Some(*id))?;
        trees.insert(*id, t.tree);
    }
    // Ids given before the snapshot to tables dropped since are in no
    // catalog entry now: not to be given again.
    catalog.reserve_ids_below(pool, &log, next_id)?;
    let mut stale = Vec::new();
    for (id, name, table, is_stale) in &snapshot.indexes {
        let t = catalog.tables.get(table).cloned().ok_or_else(|| Error::Corruption {
            path: catalog_path.to_path_buf(),
            offset: 0,
            detail: format!("index {name:?} of missing table {table:?}"),
        })?;
        let i = catalog.add_index(pool, &log, name, &t, None, Some(*id))?;
        trees.insert(*id, i.tree);
        if *is_stale {
            stale.push(name.clone());
        }
    }
    // Files of different key ranges go to different threads' trees at
    // once; a thread takes the next file when it is done with one, so
    // files of uneven sizes still share the threads out.
    let results = taking_turns("snapshot load", threads, parts.iter().collect(), |_, path| {
        load_file(storage.as_ref(), pool, scheme, &trees, path)
    })?;
    let mut out = Loaded {
        stale,
        ..Loaded::default()
    };
    for (rows, bytes) in results {
        out.rows += rows;
        out.bytes += bytes;
    }
    Ok(out)
}

fn load_file(
    storage: &dyn Storage,
    pool: &BufferPool,
    scheme: SchemeKind,
    trees: &HashMap<u32, BTree>,
    path: &Path,
) -> Result<(u64, u64)> {
    let read = snapshot_file::read(storage, path, scheme, &mut |r| {
        let Record::Row {
            table,
            tid,
            key,
            value,
        } = r
        else {
            return Ok(());
        };
        let tree = trees.get(&table).ok_or_else(|| Error::Corruption {
            path: path.to_path_buf(),
            offset: 0,
            detail: format!("a row of table id {table}, which the snapshot's catalog lacks"),
        })?;
        // Each key is in one file only; the check keeps a duplicate
        // (damage) from failing the insert, largest TID wins.
        let (current, hint) = tree.get(pool, key, None)?;
        match current {
            None => tree.insert(pool, &NoLog, key, tid, value, hint),
            Some((t, _)) if t < tid => tree.update(pool, &NoLog, key, tid, value, hint).map(|_| ()),
            Some(_) => Ok(()),
        }
    })?;
    Ok((read.rows, read.bytes))
}
