//! The durable checkpoint state: the log floor, in a small metadata file
//! replaced atomically (docs/FORMAT.md, "Checkpoint metadata").
//!
//! Invariant (DESIGN.md invariant 3, prune rule): the floor written here is
//! durable before any log segment below it is deleted, so recovery never
//! misses a record it needs: records at or below the floor are reflected
//! in the data file and belong to no transaction recovery could undo.

use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage};
use std::path::Path;

/// File name below the database directory.
pub const META_FILE: &str = "checkpoint.waypoint";
const TEMP_FILE: &str = "checkpoint.waypoint.tmp";
const MAGIC: &[u8; 8] = b"WPCHKPT\0";
/// Version of the metadata format.
pub const META_FORMAT_VERSION: u32 = 1;
/// Length of the metadata file.
pub const LEN: usize = 32;

/// ```text
/// offset size field
///      0    8 magic "WPCHKPT\0"
///      8    4 format version (u32)
///     12    4 zero
///     16    8 log floor (u64): records with a GSN at or below it are not needed
///     24    4 CRC32C of bytes 0..24
///     28    4 zero
/// ```
/// The file's bytes for `floor`.
pub fn encode(floor: u64) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&META_FORMAT_VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&floor.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The floor in `b`, the contents of the metadata file at `path`: the
/// checksum first (a mismatch is `Corruption` at offset 24, where it is
/// stored), then magic and zero padding (`Corruption` at offset 0), then the
/// format version. Every bit flip is caught: bytes 0..24 by the checksum,
/// 24..28 are the checksum, 28..32 must be zero. Never panics (fuzzed:
/// `fuzz/fuzz_targets/checkpoint_meta.rs`).
pub fn decode(path: &Path, b: &[u8]) -> Result<u64> {
    let corrupt = |offset, detail: &str| Error::Corruption {
        path: path.to_path_buf(),
        offset,
        detail: detail.into(),
    };
    if b.len() != LEN {
        return Err(corrupt(0, "checkpoint metadata has the wrong length"));
    }
    let crc = u32::from_le_bytes(b[24..28].try_into().expect("4 bytes"));
    if crc != crc32c::crc32c(&b[0..24]) {
        return Err(corrupt(24, "checkpoint metadata fails its checksum"));
    }
    if &b[0..8] != MAGIC || b[12..16] != [0; 4] || b[28..32] != [0; 4] {
        return Err(corrupt(0, "not a waypoint checkpoint metadata file"));
    }
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    if version != META_FORMAT_VERSION {
        return Err(Error::UnsupportedFormatVersion {
            path: path.to_path_buf(),
            found: version,
            supported: META_FORMAT_VERSION,
        });
    }
    Ok(u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")))
}

/// The log floor recorded in `dir`, 0 if no checkpoint has pruned yet. A
/// leftover temporary file (a crash during `write`) is ignored.
pub fn read(storage: &dyn Storage, dir: &Path) -> Result<u64> {
    let path = dir.join(META_FILE);
    if !storage.exists(&path) {
        return Ok(0);
    }
    let file = storage.open(&path, OpenMode::ReadOnly)?;
    let len = file.len()?;
    if len != LEN as u64 {
        return Err(Error::Corruption {
            path,
            offset: 0,
            detail: format!("checkpoint metadata is {len} bytes, not {LEN}"),
        });
    }
    let mut b = [0u8; LEN];
    file.read_at(&mut b, 0)?;
    decode(&path, &b)
}

/// Record `floor` durably: write a temporary file, sync it, rename it over
/// the old one, sync the directory.
pub fn write(storage: &dyn Storage, dir: &Path, floor: u64) -> Result<()> {
    let temp = dir.join(TEMP_FILE);
    if storage.exists(&temp) {
        storage.remove(&temp)?;
    }
    let file = storage.open(&temp, OpenMode::CreateNew)?;
    file.write_at(&encode(floor), 0)?;
    file.sync_data()?;
    drop(file);
    storage.rename(&temp, &dir.join(META_FILE))?;
    storage.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{CrashPolicy, SimStorage};

    #[test]
    fn floor_round_trips_survives_power_loss_and_damage_is_detected() {
        let sim = SimStorage::new(4);
        let dir = Path::new("/db");
        sim.create_dir_all(dir).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        assert_eq!(read(&sim, dir).unwrap(), 0);
        write(&sim, dir, 1234).unwrap();
        write(&sim, dir, 5678).unwrap();
        sim.crash(CrashPolicy::DropAll);
        assert_eq!(read(&sim, dir).unwrap(), 5678);
        sim.corrupt(&dir.join(META_FILE), 17, 0x10).unwrap();
        assert!(matches!(
            read(&sim, dir),
            Err(Error::Corruption { offset: 24, .. })
        ));
    }

    /// Issue 6: a bit flip anywhere in the file is detected and reported
    /// with the file and an offset inside it; so is a file of another
    /// length. (Through `Database::open`: `tests/checkpoint.rs`.)
    #[test]
    fn every_bit_flip_and_every_wrong_length_is_corruption_naming_file_and_offset() {
        let sim = SimStorage::new(5);
        let dir = Path::new("/db");
        sim.create_dir_all(dir).unwrap();
        write(&sim, dir, 0x0123_4567_89ab_cdef).unwrap();
        let path = dir.join(META_FILE);
        for byte in 0..LEN as u64 {
            for bit in 0..8 {
                sim.corrupt(&path, byte, 1 << bit).unwrap();
                match read(&sim, dir) {
                    Err(Error::Corruption {
                        path: p, offset, ..
                    }) => {
                        assert_eq!(p, path);
                        assert!(offset < LEN as u64);
                        // The checksum covers bytes 0..24 and is itself at
                        // 24; the padding after it is checked directly.
                        let expected = if byte < 28 { 24 } else { 0 };
                        assert_eq!(offset, expected, "flip of byte {byte} bit {bit}");
                    }
                    other => panic!("flip of byte {byte} bit {bit}: {other:?}"),
                }
                sim.corrupt(&path, byte, 1 << bit).unwrap();
            }
        }
        assert_eq!(read(&sim, dir).unwrap(), 0x0123_4567_89ab_cdef);
        let good = encode(7);
        for len in [0, 1, 24, 31, 33, 64] {
            let mut bytes = good.to_vec();
            bytes.resize(len, 0);
            let f = sim.open(&path, crate::io::OpenMode::Existing).unwrap();
            f.set_len(0).unwrap();
            f.write_at(&bytes, 0).unwrap();
            assert!(
                matches!(read(&sim, dir), Err(Error::Corruption { offset: 0, ref path, .. }) if *path == dir.join(META_FILE)),
                "length {len}"
            );
        }
    }
}
