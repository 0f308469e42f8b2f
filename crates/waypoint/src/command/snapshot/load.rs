//! Recovery from the installed snapshot (seed 001 §III-B): at open, read
//! the meta file and the snapshot's catalog file (reads only, before the
//! open writes anything); at recovery, load the table files into empty
//! trees, its files on the recovery threads (`persist::resident::load`, shared with
//! `silor`'s checkpoints). Indexes come back empty and stale, and are
//! rebuilt from their tables with their registered extractors before the
//! command log is re-executed from the snapshot's point on
//! (`CommandScheme::replay_after_open`).
//!
//! Invariant: the snapshot loaded is the one the meta file names, and its
//! catalog file's point equals the meta file's.

use super::install::read_meta;
use super::write::Point;
use super::{snapshot_dir, CATALOG_FILE};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::persist::resident::load::{self as base, SnapshotCatalog};
use crate::persist::SchemeKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The installed snapshot, found at open.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub point: Point,
    pub dir: PathBuf,
    pub catalog: SnapshotCatalog,
    pub tables: Vec<PathBuf>,
}

/// The installed snapshot below `command/`, if the meta file names one.
pub(crate) fn find(storage: &dyn Storage, command: &Path) -> Result<Option<Found>> {
    let Some(point) = read_meta(storage, command)? else {
        return Ok(None);
    };
    let dir = snapshot_dir(command, point.id);
    let catalog_path = dir.join(CATALOG_FILE);
    if !storage.exists(&catalog_path) {
        return Err(Error::MissingFile {
            path: catalog_path,
            detail: format!(
                "the snapshot meta file names snapshot {} (call {}) as the base the command log replays onto",
                point.id, point.sequence
            ),
        });
    }
    let catalog = base::read_catalog(storage, &catalog_path, SchemeKind::Command)?;
    let noted = catalog.meta.as_deref().and_then(Point::decode);
    if noted != Some(point) {
        return Err(Error::Corruption {
            path: catalog_path,
            offset: 0,
            detail: format!("the catalog file's point {noted:?} is not the meta file's {point:?}"),
        });
    }
    // Every table of the catalog has the files its catalog record counts
    // (one without a count: an empty table too), and no more.
    let listed: std::collections::HashSet<PathBuf> = storage.list_dir(&dir)?.into_iter().collect();
    let mut tables = Vec::new();
    for (id, _) in &catalog.tables {
        let parts = catalog.parts.get(id).copied().unwrap_or(1);
        for part in 0..parts.max(1) {
            let path = super::table_file(&dir, *id, part);
            if !listed.contains(&path) {
                return Err(Error::MissingFile {
                    path,
                    detail: format!(
                        "part {part} of {parts} of a table's rows in installed snapshot {}",
                        point.id
                    ),
                });
            }
            tables.push(path);
        }
        let extra = super::table_file(&dir, *id, parts.max(1));
        if listed.contains(&extra) {
            return Err(Error::Corruption {
                path: extra,
                offset: 0,
                detail: format!("a table part beyond the {parts} its snapshot's catalog counts"),
            });
        }
    }
    Ok(Some(Found {
        point,
        dir,
        catalog,
        tables,
    }))
}

/// What loading did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    pub rows: u64,
    pub bytes: u64,
    pub time: Duration,
    /// Indexes to rebuild from their tables.
    pub stale: Vec<String>,
}

/// Replace the trees in `pool` by the snapshot's.
pub(crate) fn load(
    storage: &Arc<dyn Storage>,
    pool: &BufferPool,
    found: &Found,
    threads: usize,
) -> Result<Loaded> {
    let began = Instant::now();
    let loaded = base::load(
        storage,
        pool,
        SchemeKind::Command,
        &found.dir.join(CATALOG_FILE),
        &found.catalog,
        found.point.next_id,
        &found.tables,
        threads,
    )?;
    Ok(Loaded {
        rows: loaded.rows,
        bytes: found.catalog.bytes + loaded.bytes,
        time: began.elapsed(),
        stale: loaded.stale,
    })
}
