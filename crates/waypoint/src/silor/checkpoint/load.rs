//! Loading the installed checkpoint at recovery (seed 002 §4.3): the
//! checkpoint, not the data file of the last clean close, is the base the
//! logs replay onto. Finding it is the pepoch file's and this module's;
//! loading it into empty trees, its part files on the recovery threads, is
//! `persist::resident::load`'s, shared with the `command` scheme's
//! snapshots.
//!
//! Invariant: the checkpoint loaded is the one the pepoch file names,
//! with the el it names.

use super::walk::decode_meta;
use super::{checkpoint_dir, checkpoints, CATALOG_FILE};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::persist::resident::load::{self as base, SnapshotCatalog};
use crate::persist::SchemeKind;
use crate::silor::pepoch::Installed;
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
    pub catalog: SnapshotCatalog,
    pub parts: Vec<PathBuf>,
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
    let catalog = base::read_catalog(storage, &catalog_path, SchemeKind::Silor)?;
    let corrupt = |detail: String| Error::Corruption {
        path: catalog_path.clone(),
        offset: 0,
        detail,
    };
    let (generation, pos, el, next_id) = catalog
        .meta
        .as_deref()
        .and_then(decode_meta)
        .ok_or_else(|| corrupt("no meta record".into()))?;
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
        catalog,
        parts,
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
    threads: usize,
) -> Result<Loaded> {
    let began = Instant::now();
    let loaded = base::load(
        storage,
        pool,
        SchemeKind::Silor,
        &found.dir.join(CATALOG_FILE),
        &found.catalog,
        found.next_id,
        &found.parts,
        threads,
    )?;
    Ok(Loaded {
        rows: loaded.rows,
        bytes: found.catalog.bytes + loaded.bytes,
        time: began.elapsed(),
        stale: loaded.stale,
    })
}
