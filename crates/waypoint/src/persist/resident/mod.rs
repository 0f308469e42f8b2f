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
    numbered_dirs(storage, root, 'g')
}

/// The entries of `dir` named `prefix` and a number (generations `g…`,
/// checkpoints `c…`, snapshots `s…`), by number, ascending; none if
/// `dir` is missing. Other names are not theirs and are left out.
pub(crate) fn numbered_dirs(
    storage: &dyn Storage,
    dir: &Path,
    prefix: char,
) -> Result<Vec<(u64, PathBuf)>> {
    if !storage.exists(dir) {
        return Ok(Vec::new());
    }
    let mut out: Vec<(u64, PathBuf)> = storage
        .list_dir(dir)?
        .into_iter()
        .filter_map(|p| {
            let n = p.file_name()?.to_str()?.strip_prefix(prefix)?.parse().ok()?;
            Some((n, p))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Remove every numbered entry of `dir` (see [`numbered_dirs`]) but
/// `keep`, each removal synced.
pub(crate) fn remove_numbered_but(
    storage: &dyn Storage,
    dir: &Path,
    prefix: char,
    keep: Option<u64>,
) -> Result<()> {
    for (n, path) in numbered_dirs(storage, dir, prefix)? {
        if Some(n) != keep {
            remove_synced(storage, &path)?;
        }
    }
    Ok(())
}

/// Bytes of the generations below `root` older than `current`: the logs
/// crashes left, which count towards a log limit until an install
/// deletes them (`silor`'s checkpoints, `command`'s snapshots).
pub(crate) fn older_generations_bytes(storage: &dyn Storage, root: &Path, current: u64) -> Result<u64> {
    Ok(generations(storage, root)?
        .into_iter()
        .filter(|(g, _)| *g < current)
        .map(|(_, path)| dir_bytes(storage, &path))
        .sum())
}

/// Bytes of the files below `dir` (for the stats; 0 where unreadable).
pub(crate) fn dir_bytes(storage: &dyn Storage, dir: &Path) -> u64 {
    let Ok(entries) = storage.list_dir(dir) else {
        return 0;
    };
    entries
        .iter()
        .map(|p| match storage.open(p, crate::io::OpenMode::ReadOnly) {
            Ok(f) => f.len().unwrap_or(0),
            Err(_) => dir_bytes(storage, p),
        })
        .sum()
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
