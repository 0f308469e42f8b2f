//! Log segment files: names and the segment header (docs/FORMAT.md, "Log
//! segments").
//!
//! A segment holds a contiguous range of one partition's record stream. Its
//! file name is the stream position of its first record; its first
//! [`HEADER_SIZE`] bytes say what the file is (magic), which log format its
//! records use, whose partition it belongs to and where it starts, so a
//! segment is self-describing and a build that cannot read its format
//! refuses it with [`Error::UnsupportedFormatVersion`] instead of
//! misreading it. Records follow the header: stream position `p` of a
//! segment starting at `start` lives at file offset `HEADER_SIZE + p - start`.

use crate::error::{Error, Result};
use crate::io::Storage;
use std::path::{Path, PathBuf};

/// Bytes before the first record of a segment.
pub const HEADER_SIZE: u64 = 32;
/// Version of the log record and segment format this build writes and reads
/// (3 since splits log their kept page and the parent's new separator as
/// small records instead of page images; 4 since record checksums are
/// salted with the record's stream position, so segment files can be
/// recycled; 5 since record headers are compressed, their integers
/// stored as vint64s; docs/FORMAT.md).
pub const LOG_FORMAT_VERSION: u32 = 5;
const MAGIC: &[u8; 8] = b"WPLOGSEG";

/// File name of the segment starting at stream position `start`.
pub fn segment_name(start: u64) -> String {
    format!("{start:020}.wal")
}

/// Parse a segment file name back into its start position.
pub fn parse_segment_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let digits = name.strip_suffix(".wal")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The segments in partition directory `dir`, by start position (other
/// files, such as the spare of [`super::spare`], are not segments).
pub fn list_segments(storage: &dyn Storage, dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut segments: Vec<(u64, PathBuf)> = storage
        .list_dir(dir)?
        .into_iter()
        .filter_map(|path| Some((parse_segment_name(&path)?, path)))
        .collect();
    segments.sort();
    Ok(segments)
}

/// Stage 3 of the log: a segment no longer needed is deleted, or, with an
/// archive directory, moved to `archive/<partition dir>/` (same file name;
/// stream positions restart at 0 after a clean close, so a name already
/// archived gets a suffix `.1`, `.2`, … rather than replacing the older
/// file). The caller syncs the segment's directory afterwards; this syncs
/// the archive's.
pub fn retire(storage: &dyn Storage, path: &Path, archive: Option<&Path>) -> Result<()> {
    let Some(archive) = archive else {
        return storage.remove(path);
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return storage.remove(path);
    };
    let target = match dir.file_name() {
        Some(partition) => archive.join(partition),
        None => archive.to_path_buf(),
    };
    if !storage.exists(&target) {
        storage.create_dir_all(&target)?;
        if let Some(parent) = target.parent() {
            storage.sync_dir(parent)?;
        }
    }
    let mut to = target.join(name);
    let mut n = 0;
    while storage.exists(&to) {
        n += 1;
        let mut suffixed = name.to_os_string();
        suffixed.push(format!(".{n}"));
        to = target.join(suffixed);
    }
    storage.rename(path, &to)?;
    storage.sync_dir(&target)
}

/// The header of a new segment of partition `partition` starting at `start`.
///
/// ```text
/// offset size field
///      0    8 magic "WPLOGSEG"
///      8    4 log format version (u32)
///     12    4 partition id (u32)
///     16    8 start: stream position of the first record (= the file name)
///     24    4 CRC32C of bytes 0..24
///     28    4 zero
/// ```
pub fn encode_header(partition: u32, start: u64) -> [u8; HEADER_SIZE as usize] {
    let mut h = [0u8; HEADER_SIZE as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&partition.to_le_bytes());
    h[16..24].copy_from_slice(&start.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What the first bytes of a segment file are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// A valid header of this build's format.
    Valid { partition: u32, start: u64 },
    /// Short, zero or failing its checksum: the header was never synced
    /// (it is written and synced with the segment's first records, so such
    /// a segment holds nothing that was durable).
    Torn,
}

/// Check the header at the start of `file` (the segment at `path`).
pub fn decode_header(path: &Path, file: &[u8]) -> Result<Header, Error> {
    let Some(h) = file.get(..HEADER_SIZE as usize) else {
        return Ok(Header::Torn);
    };
    let crc = u32::from_le_bytes(h[24..28].try_into().expect("4 bytes"));
    if crc != crc32c::crc32c(&h[0..24]) || h[28..32] != [0; 4] {
        return Ok(Header::Torn);
    }
    if &h[0..8] != MAGIC {
        return Err(Error::Corruption {
            path: path.to_path_buf(),
            offset: 0,
            detail: "not a waypoint log segment (bad magic)".into(),
        });
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if version != LOG_FORMAT_VERSION {
        return Err(Error::UnsupportedFormatVersion {
            path: PathBuf::from(path),
            found: version,
            supported: LOG_FORMAT_VERSION,
        });
    }
    Ok(Header::Valid {
        partition: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
        start: u64::from_le_bytes(h[16..24].try_into().expect("4 bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{OpenMode, SimStorage};

    /// After a clean close stream positions restart at 0, so a later
    /// segment can carry the name of one archived before: both are kept
    /// (found in review: the rename replaced the older one).
    #[test]
    fn archiving_keeps_an_older_segment_of_the_same_name() {
        let sim = SimStorage::new(1);
        let dir = Path::new("/db/wal/p00001");
        sim.create_dir_all(dir).unwrap();
        let archive = Path::new("/db/archive");
        let path = dir.join(segment_name(0));
        for life in 0..3u8 {
            let f = sim.open(&path, OpenMode::CreateNew).unwrap();
            f.write_at(&[life; 8], 0).unwrap();
            retire(&sim, &path, Some(archive)).unwrap();
        }
        let kept = sim.list_dir(&archive.join("p00001")).unwrap();
        assert_eq!(kept.len(), 3, "{kept:?}");
        let mut firsts: Vec<u8> = kept
            .iter()
            .map(|p| sim.read_current(p).unwrap()[0])
            .collect();
        firsts.sort_unstable();
        assert_eq!(firsts, vec![0, 1, 2]);
    }

    #[test]
    fn header_round_trips_and_damage_is_torn_or_refused() {
        let path = Path::new("/log/p00001/x.wal");
        let h = encode_header(7, 4096);
        assert_eq!(
            decode_header(path, &h).unwrap(),
            Header::Valid {
                partition: 7,
                start: 4096
            }
        );
        assert_eq!(decode_header(path, &h[..20]).unwrap(), Header::Torn);
        assert_eq!(decode_header(path, &[0; 32]).unwrap(), Header::Torn);
        let mut flipped = h;
        flipped[17] ^= 1;
        assert_eq!(decode_header(path, &flipped).unwrap(), Header::Torn);
        // A valid checksum over another version, older (log format 4
        // records have 56-byte headers) or newer: refused, not misread.
        for version in [LOG_FORMAT_VERSION - 1, LOG_FORMAT_VERSION + 1] {
            let mut other = h;
            other[8..12].copy_from_slice(&version.to_le_bytes());
            let crc = crc32c::crc32c(&other[0..24]);
            other[24..28].copy_from_slice(&crc.to_le_bytes());
            assert!(matches!(
                decode_header(path, &other),
                Err(Error::UnsupportedFormatVersion {
                    found,
                    supported: LOG_FORMAT_VERSION,
                    ..
                }) if found == version
            ));
        }
    }
}
