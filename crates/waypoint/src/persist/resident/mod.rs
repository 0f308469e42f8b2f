//! What the memory-resident schemes (`silor`, `command`) share. Both keep
//! every dirty page in memory while running (no steal) and replay their
//! log onto a base that is the data file as the last clean close left it,
//! untouched until the next clean close. So both need:
//!
//! - log *generations*: a recovery leaves the logs it replayed in place
//!   (the base has not moved) and the next run writes a new generation
//!   directory `gNNNNNNNN` beside them; the next recovery replays every
//!   generation in order;
//! - a journaled clean close (`journal`): the close's pages go to a
//!   journal before the first is written in place, so a crash inside the
//!   close's page writes finishes the close at the next open instead of
//!   leaving the base a mix of two states.
//!
//! Invariant: a generation directory is named by a number larger than
//! every generation before it, so the name order is the log order.

pub(crate) mod journal;
pub(crate) mod load;
pub mod snapshot_file;

use crate::error::Result;
use crate::io::Storage;
use std::path::{Path, PathBuf};

/// The directory of generation `g`'s logs below the scheme's directory.
pub(crate) fn generation_dir(root: &Path, g: u64) -> PathBuf {
    root.join(format!("g{g:08}"))
}

/// The generations found below `root`, ascending.
pub(crate) fn generations(storage: &dyn Storage, root: &Path) -> Result<Vec<(u64, PathBuf)>> {
    if !storage.exists(root) {
        return Ok(Vec::new());
    }
    let mut out: Vec<(u64, PathBuf)> = storage
        .list_dir(root)?
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let g = name.strip_prefix('g')?.parse().ok()?;
            Some((g, p))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Create `dir` if missing, with its entry synced in the parent.
pub(crate) fn create_dir(storage: &dyn Storage, dir: &Path) -> Result<()> {
    if !storage.exists(dir) {
        storage.create_dir_all(dir)?;
        if let Some(parent) = dir.parent() {
            storage.sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Replace `dir/name` by a file holding `bytes`, durably and atomically:
/// written whole under `temp` (in `dir`), synced, renamed over the old
/// one, the directory synced. A crash leaves the old file or the new.
pub(crate) fn write_renamed(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    temp: &str,
    bytes: &[u8],
) -> Result<()> {
    let temp = dir.join(temp);
    if storage.exists(&temp) {
        storage.remove(&temp)?;
    }
    let file = storage.open(&temp, crate::io::OpenMode::CreateNew)?;
    file.write_at(bytes, 0)?;
    file.sync_data()?;
    drop(file);
    storage.rename(&temp, &dir.join(name))?;
    storage.sync_dir(dir)
}

/// Remove `path` (a file or a directory with its contents) if present,
/// and sync its parent so the removal survives a crash.
pub(crate) fn remove_synced(storage: &dyn Storage, path: &Path) -> Result<()> {
    if storage.exists(path) {
        storage.remove(path)?;
        if let Some(parent) = path.parent() {
            storage.sync_dir(parent)?;
        }
    }
    Ok(())
}
