//! Log segment files: names, listing, the segment header and retiring a
//! segment (docs/FORMAT.md, "Log segments"; seed 000 §3.1's stages 2 and
//! 3).
//!
//! A segment holds a contiguous range of one stream's records (the
//! per-worker WAL: one partition's). Its file name is the stream position
//! of its first record; its first [`HEADER_SIZE`] bytes say what the file
//! is (magic), which log format its records use, which persistence scheme
//! wrote them, which stream it belongs to and where it starts, so a segment
//! is self-describing. Invariant: a segment is read only by a build of its
//! format and by its scheme: another format is refused with
//! [`Error::UnsupportedFormatVersion`], another scheme with
//! [`Error::LogSchemeMismatch`], never misread. Records follow the header:
//! stream position `p` of a segment starting at `start` lives at file
//! offset `HEADER_SIZE + p - start`.

use crate::error::{Error, Result};
use crate::ids::LogPos;
use crate::io::Storage;
use crate::persist::SchemeKind;
use std::path::{Path, PathBuf};

/// Bytes before the first record of a segment.
pub const HEADER_SIZE: u64 = 32;
/// Version of the log format this build writes and reads: segment header,
/// record frames and every scheme's payloads (3 since splits log their
/// kept page and the parent's new separator as small records instead of
/// page images; 4 since record checksums are salted with the record's
/// stream position, so segment files can be recycled; 5 since record
/// headers are compressed, their integers stored as vint64s; 6 since the
/// frame (length, checksum, watermark) precedes the scheme's payload and
/// the segment header names the scheme; docs/FORMAT.md).
pub const LOG_FORMAT_VERSION: u32 = 6;
const MAGIC: &[u8; 8] = b"WPLOGSEG";

/// File name of the segment starting at stream position `start`.
pub fn segment_name(start: LogPos) -> String {
    format!("{:020}.wal", start.get())
}

/// Parse a segment file name back into its start position.
pub fn parse_segment_name(path: &Path) -> Option<LogPos> {
    let name = path.file_name()?.to_str()?;
    let digits = name.strip_suffix(".wal")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok().map(LogPos::new))
        .flatten()
}

/// The segments in stream directory `dir`, by start position (other
/// files, such as the spare of [`super::spare`], are not segments).
///
/// A segment named beyond [`MAX_SEGMENT_START`] is refused as corruption:
/// no stream gets there (2^62 bytes), and positions computed from it
/// (start plus the bytes read) would overflow.
pub fn list_segments(storage: &dyn Storage, dir: &Path) -> Result<Vec<(LogPos, PathBuf)>> {
    let mut segments: Vec<(LogPos, PathBuf)> = storage
        .list_dir(dir)?
        .into_iter()
        .filter_map(|path| Some((parse_segment_name(&path)?, path)))
        .collect();
    for (start, path) in &segments {
        check_start(path, *start)?;
    }
    segments.sort();
    Ok(segments)
}

/// Refuse a segment named beyond [`MAX_SEGMENT_START`] (see
/// [`list_segments`]).
pub fn check_start(path: &Path, start: LogPos) -> Result<()> {
    if start > MAX_SEGMENT_START {
        return Err(Error::Corruption {
            path: path.to_path_buf(),
            offset: 0,
            detail: format!(
                "log segment named for stream position {start}, beyond any stream (at most {MAX_SEGMENT_START})"
            ),
        });
    }
    Ok(())
}

/// The largest start position a segment may be named for.
pub const MAX_SEGMENT_START: LogPos = LogPos::new(1 << 62);

/// Stage 3 of the log: a segment no longer needed is deleted, or, with an
/// archive directory, moved to `archive/<stream dir>/` (same file name;
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
        Some(stream) => archive.join(stream),
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

/// The header of a new segment of stream `stream`, written by `scheme`,
/// starting at stream position `start`.
///
/// ```text
/// offset size field
///      0    8 magic "WPLOGSEG"
///      8    4 log format version (u32)
///     12    4 stream id (u32): the per-worker WAL's partition id
///     16    8 start: stream position of the first record (= the file name)
///     24    4 CRC32C of bytes 0..24, then of bytes 28..32
///     28    1 scheme tag (`SchemeKind::tag`)
///     29    3 zero
/// ```
pub fn encode_header(scheme: SchemeKind, stream: u32, start: LogPos) -> [u8; HEADER_SIZE as usize] {
    let mut h = [0u8; HEADER_SIZE as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&stream.to_le_bytes());
    h[16..24].copy_from_slice(&start.get().to_le_bytes());
    h[28] = scheme.tag();
    let crc = header_checksum(&h);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The checksum of a header (bytes 24..28): over every byte but its own.
pub fn header_checksum(h: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&h[0..24]), &h[28..32])
}

/// What the first bytes of a segment file are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// A valid header of this build's format and the reader's scheme.
    Valid { stream: u32, start: LogPos },
    /// Short, zero or failing its checksum: the header was never synced
    /// (it is written and synced with the segment's first records, so such
    /// a segment holds nothing that was durable).
    Torn,
}

/// Check the header at the start of `file` (the segment at `path`), read
/// by `scheme`.
pub fn decode_header(path: &Path, file: &[u8], scheme: SchemeKind) -> Result<Header, Error> {
    let Some(h) = file.get(..HEADER_SIZE as usize) else {
        return Ok(Header::Torn);
    };
    let crc = u32::from_le_bytes(h[24..28].try_into().expect("4 bytes"));
    if crc != header_checksum(h) {
        // Log format 5 and older checked bytes 0..24 only, and 28..32 were
        // zero: such a header is whole, and refused by its version below
        // rather than taken for one never synced (recovery would delete
        // the segment).
        let older = crc == crc32c::crc32c(&h[0..24]) && h[28..32] == [0; 4];
        if !older {
            return Ok(Header::Torn);
        }
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
    if h[29..32] != [0; 3] {
        return Err(Error::Corruption {
            path: path.to_path_buf(),
            offset: 29,
            detail: "segment header bytes 29..32 are not zero".into(),
        });
    }
    if h[28] != scheme.tag() {
        return Err(Error::LogSchemeMismatch {
            path: path.to_path_buf(),
            found: h[28],
            expected: scheme,
        });
    }
    Ok(Header::Valid {
        stream: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
        start: LogPos::new(u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"))),
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
        let path = dir.join(segment_name(LogPos::ZERO));
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

    /// A segment name near 2^64 would overflow the positions recovery
    /// computes from it (start plus the bytes read): it is refused.
    #[test]
    fn a_segment_named_beyond_any_stream_is_corruption() {
        let sim = SimStorage::new(2);
        let dir = Path::new("/db/wal/p00000");
        sim.create_dir_all(dir).unwrap();
        for start in [0, 1 << 62] {
            let path = dir.join(segment_name(LogPos::new(start)));
            sim.open(&path, OpenMode::CreateNew).unwrap();
        }
        assert_eq!(list_segments(&sim, dir).unwrap().len(), 2);
        let far = dir.join(segment_name(LogPos::new(u64::MAX - 10)));
        sim.open(&far, OpenMode::CreateNew).unwrap();
        match list_segments(&sim, dir) {
            Err(Error::Corruption { path, .. }) => assert_eq!(path, far),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn header_round_trips_and_damage_is_torn_or_refused() {
        let path = Path::new("/log/p00001/x.wal");
        let ours = SchemeKind::PerWorker;
        let h = encode_header(ours, 7, LogPos::new(4096));
        assert_eq!(
            decode_header(path, &h, ours).unwrap(),
            Header::Valid {
                stream: 7,
                start: LogPos::new(4096)
            }
        );
        assert_eq!(decode_header(path, &h[..20], ours).unwrap(), Header::Torn);
        assert_eq!(decode_header(path, &[0; 32], ours).unwrap(), Header::Torn);
        // Every byte is under the checksum, the scheme tag too.
        for byte in [17, 28, 30] {
            let mut flipped = h;
            flipped[byte] ^= 1;
            assert_eq!(
                decode_header(path, &flipped, ours).unwrap(),
                Header::Torn,
                "byte {byte}"
            );
        }
        // A valid checksum over another version, newer or older: refused,
        // not misread. Format 5 and older checksummed bytes 0..24 only.
        let sealed = |mut h: [u8; 32], old_layout: bool| {
            let crc = if old_layout {
                crc32c::crc32c(&h[0..24])
            } else {
                header_checksum(&h)
            };
            h[24..28].copy_from_slice(&crc.to_le_bytes());
            h
        };
        for (version, old_layout) in [(LOG_FORMAT_VERSION + 1, false), (5, true), (4, true)] {
            let mut other = h;
            other[8..12].copy_from_slice(&version.to_le_bytes());
            if old_layout {
                other[28..32].fill(0);
            }
            let other = sealed(other, old_layout);
            assert!(matches!(
                decode_header(path, &other, ours),
                Err(Error::UnsupportedFormatVersion {
                    found,
                    supported: LOG_FORMAT_VERSION,
                    ..
                }) if found == version
            ));
        }
        // A segment of another scheme (or an unknown one): refused by name.
        for tag in [SchemeKind::None.tag(), 99] {
            let mut other = h;
            other[28] = tag;
            let other = sealed(other, false);
            let e = decode_header(path, &other, ours).unwrap_err();
            assert!(
                matches!(e, Error::LogSchemeMismatch { found, expected: SchemeKind::PerWorker, .. } if found == tag),
                "{e:?}"
            );
        }
        let e = decode_header(path, &h, SchemeKind::None).unwrap_err();
        assert!(e.to_string().contains("per-worker"), "{e}");
        // Nonzero reserved bytes under a valid checksum, and a bad magic.
        let mut reserved = h;
        reserved[31] = 1;
        let reserved = sealed(reserved, false);
        assert!(matches!(
            decode_header(path, &reserved, ours),
            Err(Error::Corruption { offset: 29, .. })
        ));
        let mut magic = h;
        magic[0] = b'X';
        let magic = sealed(magic, false);
        assert!(matches!(
            decode_header(path, &magic, ours),
            Err(Error::Corruption { offset: 0, .. })
        ));
    }
}
