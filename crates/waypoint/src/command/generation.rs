//! The partition count a log generation's calls ran under (seed 001
//! §III-B: replay routes each call to the partition it ran in).
//! `CommandOptions::partitions` may change from one open to the next, and
//! every open after a crash logs to a new generation
//! (`persist::resident`), so the count is a property of the generation:
//! the file `partitions` in its directory, written whole (renamed into
//! place, synced) before the generation's stream exists
//! (docs/FORMAT.md, "Command log generations").
//!
//! ```text
//! [magic "WPCMDGEN"][version: u32 LE = 1][partitions: u32 LE][CRC32C of the 16 bytes before: u32 LE]
//! ```
//!
//! A generation without the file was written before parallel replay:
//! its count is not known, and its calls are replayed one at a time.
//! Pruning after a snapshot removes segments only, so the file stays as
//! long as any of the generation's log does.
//!
//! Invariant: a generation's segments exist only once its `partitions`
//! file is whole and durable; the count read back is the count its calls
//! ran under, or an error (never a guess).

use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage};
use crate::persist::resident;
use std::path::Path;

/// The file's name inside a generation directory.
pub const PARTITIONS_FILE: &str = "partitions";
const PARTITIONS_TEMP: &str = "partitions.tmp";
const MAGIC: &[u8; 8] = b"WPCMDGEN";
const VERSION: u32 = 1;
const SIZE: usize = 20;

fn encode(partitions: usize) -> [u8; SIZE] {
    let mut b = [0u8; SIZE];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(partitions as u32).to_le_bytes());
    let crc = crc32c::crc32c(&b[0..16]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Record, durably, that generation directory `gdir`'s calls run under
/// `partitions` (creating the directory).
pub(super) fn write(storage: &dyn Storage, gdir: &Path, partitions: usize) -> Result<()> {
    resident::create_dir(storage, gdir)?;
    resident::write_renamed(
        storage,
        gdir,
        PARTITIONS_FILE,
        PARTITIONS_TEMP,
        &encode(partitions),
    )
}

/// The partition count generation directory `gdir`'s calls ran under;
/// `None` for a generation written before the count was recorded.
pub(super) fn read(storage: &dyn Storage, gdir: &Path) -> Result<Option<usize>> {
    let path = gdir.join(PARTITIONS_FILE);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let file = storage.open(&path, OpenMode::ReadOnly)?;
    let len = file.len()?;
    let corrupt = |offset: u64, detail: String| Error::Corruption {
        path: path.clone(),
        offset,
        detail,
    };
    if len != SIZE as u64 {
        // Renamed into place whole: any other size is damage.
        return Err(corrupt(0, format!("{len} bytes, not {SIZE}")));
    }
    let mut b = [0u8; SIZE];
    file.read_at(&mut b, 0)?;
    let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    if &b[0..8] != MAGIC || word(16) != crc32c::crc32c(&b[0..16]) {
        return Err(corrupt(
            0,
            "not a generation's partition count (magic or checksum)".into(),
        ));
    }
    if word(8) != VERSION {
        return Err(Error::UnsupportedFormatVersion {
            path,
            found: word(8),
            supported: VERSION,
        });
    }
    let partitions = word(12) as usize;
    if !(1..=super::CommandOptions::MAX_PARTITIONS).contains(&partitions) {
        return Err(corrupt(
            12,
            format!("{partitions} partitions, out of range"),
        ));
    }
    Ok(Some(partitions))
}
