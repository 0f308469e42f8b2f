//! Loading the installed checkpoint at recovery (seed 002 §4.3): the
//! checkpoint, not the data file of the last clean close, is the base the
//! logs replay onto. So every table and index the data file holds is
//! dropped first (its pages freed in memory: the data file is not written
//! until the next clean close), the checkpoint's catalog is created with
//! its ids, and each part file is loaded by a thread of its own.
//!
//! Why start from empty tables rather than merge into the data file's
//! trees: a key deleted since the last clean close is in the data file
//! and not in the checkpoint, and its tombstone may be in a pruned log
//! segment; merging would bring it back.
//!
//! Invariant: after loading, the trees hold exactly the checkpoint's rows
//! with their TIDs, under the checkpoint's catalog.

use super::walk::decode_meta;
use super::{checkpoint_dir, checkpoints, CATALOG_FILE};
use crate::btree::{BTree, NoLog};
use crate::buffer::BufferPool;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::parallel::on_threads;
use crate::io::Storage;
use crate::persist::resident::snapshot_file::{self, Record};
use crate::persist::SchemeKind;
use crate::silor::pepoch::Installed;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the installed checkpoint is, read at open (reads only).
#[derive(Debug, Clone)]
pub(in crate::silor) struct Found {
    pub installed: Installed,
    pub dir: PathBuf,
    /// Catalog changes logged at or after (generation, logger-0 position)
    /// are not in the checkpoint's catalog.
    pub catalog_from: (u64, u64),
    /// The catalog's next id when the checkpoint was taken.
    pub next_id: u32,
    pub tables: Vec<(u32, String)>,
    /// (id, name, table, stale).
    pub indexes: Vec<(u32, String, String, bool)>,
    pub parts: Vec<PathBuf>,
    pub catalog_bytes: u64,
}

/// Read the catalog file of the checkpoint `installed` names.
pub(in crate::silor) fn find(storage: &dyn Storage, silor: &Path, installed: Installed) -> Result<Found> {
    let dir = checkpoint_dir(silor, installed.id);
    let catalog_path = dir.join(CATALOG_FILE);
    if !storage.exists(&catalog_path) {
        return Err(Error::MissingFile {
            path: catalog_path,
            detail: format!(
                "the pepoch file names checkpoint {} (epochs {} to {}) as the base the logs replay onto",
                installed.id, installed.el, installed.eh
            ),
        });
    }
    let mut tables = Vec::new();
    let mut indexes = Vec::new();
    let mut meta = None;
    let read = snapshot_file::read(storage, &catalog_path, SchemeKind::Silor, &mut |r| {
        match r {
            Record::Table { id, name } => tables.push((id, name)),
            Record::Index {
                id,
                name,
                table,
                stale,
            } => indexes.push((id, name, table, stale)),
            Record::Meta(bytes) => meta = decode_meta(bytes),
            Record::Row { .. } | Record::End { .. } => {}
        }
        Ok(())
    })?;
    let corrupt = |detail: String| Error::Corruption {
        path: catalog_path.clone(),
        offset: 0,
        detail,
    };
    let (generation, pos, el, next_id) = meta.ok_or_else(|| corrupt("no meta record".into()))?;
    if el != installed.el {
        return Err(corrupt(format!(
            "the checkpoint says el = {el}, the pepoch file {}",
            installed.el
        )));
    }
    let mut parts: Vec<PathBuf> = storage
        .list_dir(&dir)?
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('p') && n.ends_with(".snap"))
        })
        .collect();
    parts.sort();
    Ok(Found {
        installed,
        dir,
        catalog_from: (generation, pos),
        next_id,
        tables,
        indexes,
        parts,
        catalog_bytes: read.bytes,
    })
}

/// The id of the newest checkpoint directory (installed or not).
pub(in crate::silor) fn last_id(storage: &dyn Storage, silor: &Path) -> Result<u64> {
    Ok(checkpoints(storage, silor)?.last().map_or(0, |(id, _)| *id))
}

/// What loading did.
#[derive(Debug, Clone, Default)]
pub(in crate::silor) struct Loaded {
    pub rows: u64,
    pub bytes: u64,
    pub time: Duration,
    /// Indexes whose entries may not match their table.
    pub stale: Vec<String>,
}

/// Replace the trees in `pool` by the checkpoint's.
pub(in crate::silor) fn load(
    storage: &Arc<dyn Storage>,
    pool: &BufferPool,
    found: &Found,
) -> Result<Loaded> {
    let began = Instant::now();
    let log = NoLog;
    let mut catalog = Catalog::load(pool)?;
    let names: Vec<String> = catalog.tables.keys().cloned().collect();
    for name in names {
        catalog.remove_table(pool, &log, &name)?;
    }
    let mut trees: HashMap<u32, BTree> = HashMap::new();
    for (id, name) in &found.tables {
        let t = catalog.add_table(pool, &log, name, Some(*id))?;
        trees.insert(*id, t.tree);
    }
    // Ids given before the checkpoint to tables dropped since are in no
    // catalog entry now: not to be given again.
    catalog.reserve_ids_below(pool, &log, found.next_id)?;
    let mut stale = Vec::new();
    for (id, name, table, is_stale) in &found.indexes {
        let t = catalog.tables.get(table).cloned().ok_or_else(|| Error::Corruption {
            path: found.dir.join(CATALOG_FILE),
            offset: 0,
            detail: format!("index {name:?} of missing table {table:?}"),
        })?;
        let i = catalog.add_index(pool, &log, name, &t, None, Some(*id))?;
        trees.insert(*id, i.tree);
        if *is_stale {
            stale.push(name.clone());
        }
    }
    let results = on_threads("checkpoint load", &found.parts, |_, path| {
        load_file(storage.as_ref(), pool, &trees, path)
    })?;
    let mut out = Loaded {
        bytes: found.catalog_bytes,
        stale,
        ..Loaded::default()
    };
    for (rows, bytes) in results {
        out.rows += rows;
        out.bytes += bytes;
    }
    out.time = began.elapsed();
    Ok(out)
}

fn load_file(
    storage: &dyn Storage,
    pool: &BufferPool,
    trees: &HashMap<u32, BTree>,
    path: &Path,
) -> Result<(u64, u64)> {
    let read = snapshot_file::read(storage, path, SchemeKind::Silor, &mut |r| {
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
            detail: format!("a row of table id {table}, which the checkpoint's catalog lacks"),
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
