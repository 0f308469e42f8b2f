//! The durable checkpoint state in `checkpoint.waypoint`, a small file
//! replaced atomically (docs/FORMAT.md, "Checkpoint metadata"): the log
//! floor, and how far each log partition is known to be synced.
//!
//! Invariants:
//! - (DESIGN.md invariant 3, prune rule) the floor written here is durable
//!   before any log segment below it is deleted, so recovery never misses a
//!   record it needs: records at or below the floor are reflected in the
//!   data file and belong to no transaction recovery could undo.
//! - A synced position recorded for a partition was durable in that
//!   partition's log when it was written, and the positions only grow while
//!   the database is open. A log that ends before it lost synced bytes;
//!   recovery refuses it (`Error::LogTruncated`) instead of taking the loss
//!   for a torn tail.
//! - Every `Database::open` with a log writes this file (with the
//!   recovered ends as the synced positions) before it marks the superblock
//!   unclean, so a database that was not closed cleanly always has it.

use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use crate::io::{OpenMode, Storage};
use std::path::Path;

/// File name below the database directory.
pub const META_FILE: &str = "checkpoint.waypoint";
const TEMP_FILE: &str = "checkpoint.waypoint.tmp";
const MAGIC: &[u8; 8] = b"WPCHKPT\0";
/// Version of the metadata format this build writes. Version 1 (the floor
/// alone, no partitions) is still read: its bytes are those of a version 2
/// file with no partition, but for the version.
pub const META_FORMAT_VERSION: u32 = 2;
/// Length of a file that lists no partition (the whole of a version 1 file).
pub const LEN: usize = 32;
/// Bytes per partition entry.
pub const ENTRY_LEN: usize = 16;
/// At most one entry per session slot.
pub const MAX_ENTRIES: usize = 1 << 16;

/// What `checkpoint.waypoint` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// The format version the file was written in (1 or 2).
    pub version: u32,
    /// The log floor: records with a GSN at or below it are not needed.
    pub floor: Gsn,
    /// Per log partition, the stream position up to which its log was
    /// durable when the file was written, in increasing partition order;
    /// partitions at position 0 are left out.
    pub synced: Vec<(u32, LogPos)>,
}

impl Meta {
    /// The synced position recorded for `partition` (0 if none).
    pub fn synced(&self, partition: u32) -> LogPos {
        self.synced
            .binary_search_by_key(&partition, |&(p, _)| p)
            .map_or(LogPos::ZERO, |i| self.synced[i].1)
    }
}

/// ```text
/// offset size field
///      0    8 magic "WPCHKPT\0"
///      8    4 format version (u32)
///     12    4 n: partition entries (u32)
///     16    8 log floor (u64): records with a GSN at or below it are not needed
///     24 16*n per partition, in increasing partition order:
///             partition (u32), zero (u32), synced stream position (u64, > 0)
/// 24+16n    4 CRC32C of bytes 0..24+16n
/// 28+16n    4 zero
/// ```
/// The file's bytes for `floor` and the synced positions `synced` (in
/// increasing partition order; zero positions are left out).
pub fn encode(floor: Gsn, synced: &[(u32, LogPos)]) -> Vec<u8> {
    let entries: Vec<(u32, LogPos)> = synced
        .iter()
        .copied()
        .filter(|&(_, p)| p > LogPos::ZERO)
        .collect();
    debug_assert!(
        entries.windows(2).all(|w| w[0].0 < w[1].0),
        "partitions in order"
    );
    debug_assert!(entries.len() <= MAX_ENTRIES);
    let mut b = Vec::with_capacity(LEN + ENTRY_LEN * entries.len());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&META_FORMAT_VERSION.to_le_bytes());
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    b.extend_from_slice(&floor.get().to_le_bytes());
    for (partition, position) in entries {
        b.extend_from_slice(&partition.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&position.get().to_le_bytes());
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b
}

/// The contents `b` of the metadata file at `path`: the length against the
/// entry count first (`Corruption` at offset 12, where the count is), then
/// the checksum (a mismatch is `Corruption` at its offset), then magic and
/// zero padding (`Corruption` at offset 0), the format version, and the
/// entries (`Corruption` at the entry). Every bit flip is caught: the
/// count by the length, everything before the checksum by the checksum,
/// the padding after it directly. Never panics (fuzzed:
/// `fuzz/fuzz_targets/checkpoint_meta.rs`).
pub fn decode(path: &Path, b: &[u8]) -> Result<Meta> {
    let corrupt = |offset: usize, detail: &str| Error::Corruption {
        path: path.to_path_buf(),
        offset: offset as u64,
        detail: detail.into(),
    };
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    if b.len() < LEN {
        return Err(corrupt(0, "checkpoint metadata has the wrong length"));
    }
    let n = u32_at(12) as usize;
    if n > MAX_ENTRIES || b.len() != LEN + ENTRY_LEN * n {
        return Err(corrupt(
            12,
            &format!(
                "checkpoint metadata lists {n} partitions but is {} bytes long",
                b.len()
            ),
        ));
    }
    let end = b.len() - 8;
    if u32_at(end) != crc32c::crc32c(&b[..end]) {
        return Err(corrupt(end, "checkpoint metadata fails its checksum"));
    }
    if &b[0..8] != MAGIC || b[end + 4..] != [0; 4] {
        return Err(corrupt(0, "not a waypoint checkpoint metadata file"));
    }
    let version = u32_at(8);
    if version != META_FORMAT_VERSION && !(version == 1 && n == 0) {
        return Err(Error::UnsupportedFormatVersion {
            path: path.to_path_buf(),
            found: version,
            supported: META_FORMAT_VERSION,
        });
    }
    let mut synced = Vec::with_capacity(n);
    for i in 0..n {
        let at = 24 + ENTRY_LEN * i;
        let (partition, position) = (u32_at(at), u64_at(at + 8));
        if u32_at(at + 4) != 0
            || position == 0
            || synced.last().is_some_and(|&(p, _)| p >= partition)
        {
            return Err(corrupt(
                at,
                "checkpoint metadata entry is not a partition after the previous one with a position above 0",
            ));
        }
        synced.push((partition, LogPos::new(position)));
    }
    Ok(Meta {
        version,
        floor: Gsn::new(u64_at(16)),
        synced,
    })
}

/// The metadata recorded in `dir`, `None` if the file does not exist. A
/// leftover temporary file (a crash during `write`) is ignored.
pub fn read(storage: &dyn Storage, dir: &Path) -> Result<Option<Meta>> {
    let path = dir.join(META_FILE);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let file = storage.open(&path, OpenMode::ReadOnly)?;
    let len = file.len()?;
    if len < LEN as u64 || len > (LEN + ENTRY_LEN * MAX_ENTRIES) as u64 {
        return Err(Error::Corruption {
            path,
            offset: 0,
            detail: format!("checkpoint metadata is {len} bytes long"),
        });
    }
    let mut b = vec![0u8; len as usize];
    file.read_at(&mut b, 0)?;
    decode(&path, &b).map(Some)
}

/// Record `floor` and the synced positions `synced` (increasing partition
/// order) durably: write a temporary file, sync it, rename it over the old
/// one, sync the directory. A crash leaves the old file or the new one.
pub fn write(
    storage: &dyn Storage,
    dir: &Path,
    floor: Gsn,
    synced: &[(u32, LogPos)],
) -> Result<()> {
    let temp = dir.join(TEMP_FILE);
    if storage.exists(&temp) {
        storage.remove(&temp)?;
    }
    let file = storage.open(&temp, OpenMode::CreateNew)?;
    file.write_at(&encode(floor, synced), 0)?;
    file.sync_data()?;
    drop(file);
    storage.rename(&temp, &dir.join(META_FILE))?;
    storage.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{CrashPolicy, SimStorage};

    /// `(partition, position)` pairs as positions.
    fn at(synced: &[(u32, u64)]) -> Vec<(u32, LogPos)> {
        synced.iter().map(|&(p, pos)| (p, LogPos::new(pos))).collect()
    }

    fn meta(floor: u64, synced: &[(u32, u64)]) -> Meta {
        Meta {
            version: META_FORMAT_VERSION,
            floor: Gsn::new(floor),
            synced: at(synced),
        }
    }

    #[test]
    fn floor_and_synced_positions_round_trip_survive_power_loss_and_damage_is_detected() {
        let sim = SimStorage::new(4);
        let dir = Path::new("/db");
        sim.create_dir_all(dir).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        assert_eq!(read(&sim, dir).unwrap(), None);
        write(&sim, dir, Gsn::new(1234), &at(&[(0, 10)])).unwrap();
        write(
            &sim,
            dir,
            Gsn::new(5678),
            &at(&[(0, 4096), (3, 0), (65535, 1 << 40)]),
        )
        .unwrap();
        sim.crash(CrashPolicy::DropAll);
        let m = read(&sim, dir).unwrap().unwrap();
        assert_eq!(
            m,
            meta(5678, &[(0, 4096), (65535, 1 << 40)]),
            "zeros left out"
        );
        assert_eq!(
            (m.synced(0).get(), m.synced(3).get(), m.synced(65535).get()),
            (4096, 0, 1 << 40)
        );
        sim.corrupt(&dir.join(META_FILE), 17, 0x10).unwrap();
        assert!(matches!(
            read(&sim, dir),
            Err(Error::Corruption { offset: 56, .. })
        ));
    }

    /// A version 1 file (the floor alone) is a version 2 file without
    /// partitions but for its version: it reads as the floor with no
    /// synced positions.
    #[test]
    fn a_version_1_file_reads_as_its_floor() {
        let path = Path::new("/db").join(META_FILE);
        let mut b = encode(Gsn::new(99), &[]);
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32c::crc32c(&b[..24]);
        b[24..28].copy_from_slice(&crc.to_le_bytes());
        let m = decode(&path, &b).unwrap();
        assert_eq!((m.version, m.floor, m.synced.len()), (1, Gsn::new(99), 0));
        for version in [0, 3, u32::MAX] {
            b[8..12].copy_from_slice(&version.to_le_bytes());
            let crc = crc32c::crc32c(&b[..24]);
            b[24..28].copy_from_slice(&crc.to_le_bytes());
            assert!(matches!(
                decode(&path, &b),
                Err(Error::UnsupportedFormatVersion { found, supported: 2, .. }) if found == version
            ));
        }
    }

    /// Issue 6: a bit flip anywhere in the file is detected and reported
    /// with the file and an offset inside it; so is a file of another
    /// length. (Through `Database::open`: `tests/checkpoint.rs`.)
    #[test]
    fn every_bit_flip_and_every_wrong_length_is_corruption_naming_file_and_offset() {
        let sim = SimStorage::new(5);
        let dir = Path::new("/db");
        sim.create_dir_all(dir).unwrap();
        let synced = [(1, 0x0fed_cba9_8765_4321), (7, 8)];
        write(&sim, dir, Gsn::new(0x0123_4567_89ab_cdef), &at(&synced)).unwrap();
        let path = dir.join(META_FILE);
        let len = (LEN + 2 * ENTRY_LEN) as u64;
        let crc_at = len - 8;
        for byte in 0..len {
            for bit in 0..8 {
                sim.corrupt(&path, byte, 1 << bit).unwrap();
                match read(&sim, dir) {
                    Err(Error::Corruption {
                        path: p, offset, ..
                    }) => {
                        assert_eq!(p, path);
                        assert!(offset < len);
                        // The count must agree with the length; the
                        // checksum covers everything before it and is
                        // itself at crc_at; the padding after it is
                        // checked directly.
                        let expected = if (12..16).contains(&byte) {
                            12
                        } else if byte < crc_at + 4 {
                            crc_at
                        } else {
                            0
                        };
                        assert_eq!(offset, expected, "flip of byte {byte} bit {bit}");
                    }
                    other => panic!("flip of byte {byte} bit {bit}: {other:?}"),
                }
                sim.corrupt(&path, byte, 1 << bit).unwrap();
            }
        }
        assert_eq!(
            read(&sim, dir).unwrap().unwrap(),
            meta(0x0123_4567_89ab_cdef, &synced)
        );
        let good = encode(Gsn::new(7), &at(&synced));
        for len in [0, 1, 24, 31, 32, 33, 48, 63, 65, 80] {
            let mut bytes = good.to_vec();
            bytes.resize(len, 0);
            let f = sim.open(&path, crate::io::OpenMode::Existing).unwrap();
            f.set_len(0).unwrap();
            f.write_at(&bytes, 0).unwrap();
            let expected = if len < LEN { 0 } else { 12 };
            assert!(
                matches!(read(&sim, dir), Err(Error::Corruption { offset, ref path, .. }) if *path == dir.join(META_FILE) && offset == expected),
                "length {len}"
            );
        }
        // Entries out of order, or at position 0, behind a valid checksum.
        for bad in [[(7u32, 1u64), (1, 1)], [(1, 1), (1, 2)], [(1, 0), (2, 1)]] {
            let mut b = encode(Gsn::new(7), &at(&[(1, 1), (2, 1)]));
            for (i, (p, pos)) in bad.iter().enumerate() {
                b[24 + 16 * i..28 + 16 * i].copy_from_slice(&p.to_le_bytes());
                b[32 + 16 * i..40 + 16 * i].copy_from_slice(&pos.to_le_bytes());
            }
            let crc = crc32c::crc32c(&b[..56]);
            b[56..60].copy_from_slice(&crc.to_le_bytes());
            assert!(
                matches!(
                    decode(&path, &b),
                    Err(Error::Corruption {
                        offset: 24 | 40,
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }
}
