//! Snapshot files: a memory-resident scheme's copy of its tables, written
//! while it runs and loaded at recovery instead of replaying the whole log
//! (seed 002 §4.2's checkpoint files; `silor::checkpoint` writes them
//! fuzzily, and the `command` scheme's transaction-consistent snapshots of
//! seed 001 can write the same files). A file holds catalog records
//! (tables and indexes with their ids), an optional scheme-owned metadata
//! record, rows (table id, TID, key, value) in each table's key order, and
//! an end record with the count of records before it
//! (docs/FORMAT.md, "Snapshot files").
//!
//! ```text
//! header: [magic "WPSNAPSH": 8][version u32][part u32][scheme tag u8]
//!         [zero: 11][CRC32C of bytes 0..28: u32]
//! then logstore frames (`logstore::frame`), placed at position
//! (file offset - 32), each holding one record:
//!   row:    [1][table: vint][tid: vint][key len: vint][key]
//!           [value len: vint][value]
//!   table:  [2][id: vint][name len: vint][name]
//!   index:  [3][id: vint][stale: u8][name len: vint][name]
//!           [table len: vint][table]
//!   meta:   [4][len: vint][bytes]
//!   end:    [5][records before it: vint]
//!   parts:  [6][table: vint][part files: vint]
//! ```
//!
//! The framing, checksums and the torn-tail/corruption scan are the log
//! store's (`logstore::frame`, `logstore::scan`): each frame's watermark is
//! the file's synced length when the frame was written, so damage to
//! bytes that were already synced reads as corruption, not as a tail.
//! The writer syncs every [`SYNC_EVERY`] bytes (SiloR §4.2 found that
//! syncing a checkpoint only at its end stalls the device) and at the end.
//!
//! Invariant: a file the reader accepts is whole: every frame valid up to
//! an end record whose count matches; anything else is `Corruption` naming
//! the file and offset (a scheme reads only files it made durable and
//! recorded as installed, so a short file is damage, never a tail).

use crate::error::{Error, Result};
use crate::ids::{LogPos, Tid};
use crate::io::{OpenMode, Storage, StorageFile};
use crate::logstore::frame::{self, Frame};
use crate::logstore::scan::{self, Payloads, ScanEnd};
use crate::persist::SchemeKind;
use std::path::Path;
use std::sync::Arc;

/// Bytes before the first frame.
pub const HEADER_SIZE: u64 = 32;
/// The format this build writes and reads.
pub const VERSION: u32 = 1;
/// A snapshot file is synced each time this many bytes were written
/// since the last sync (SiloR §4.2: 32 MiB).
pub const SYNC_EVERY: u64 = 32 << 20;
const MAGIC: &[u8; 8] = b"WPSNAPSH";
/// Frames are written to the file in pieces of about this size.
const WRITE_CHUNK: usize = 1 << 20;
/// The reader reads the file in pieces of this size (at least two of the
/// longest frame, so each piece ends at least one frame further).
const READ_CHUNK: u64 = 2 * frame::MAX_LEN as u64 + (1 << 20);

const KIND_ROW: u8 = 1;
const KIND_TABLE: u8 = 2;
const KIND_INDEX: u8 = 3;
const KIND_META: u8 = 4;
const KIND_END: u8 = 5;
const KIND_PARTS: u8 = 6;

/// One record of a snapshot file, borrowing from the bytes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Row {
        table: u32,
        tid: Tid,
        key: &'a [u8],
        value: &'a [u8],
    },
    Table {
        id: u32,
        name: String,
    },
    Index {
        id: u32,
        name: String,
        table: String,
        /// Its entries may not match its table: rebuilt when its
        /// extractor is bound.
        stale: bool,
    },
    /// The scheme's own metadata.
    Meta(&'a [u8]),
    /// Table `table`'s rows are in `parts` files (`command`'s snapshots,
    /// in their catalog file; a table without one has one file).
    Parts {
        table: u32,
        parts: u32,
    },
    End {
        records: u64,
    },
}

fn encode_header(scheme: SchemeKind, part: u32) -> [u8; HEADER_SIZE as usize] {
    let mut h = [0u8; HEADER_SIZE as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&part.to_le_bytes());
    h[16] = scheme.tag();
    let crc = crc32c::crc32c(&h[..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The part number a valid header names.
fn decode_header(path: &Path, h: &[u8], scheme: SchemeKind) -> Result<u32> {
    let bad = |detail: &str| Error::Corruption {
        path: path.to_path_buf(),
        offset: 0,
        detail: format!("snapshot file header: {detail}"),
    };
    let h = h.get(..HEADER_SIZE as usize).ok_or_else(|| bad("truncated"))?;
    if &h[0..8] != MAGIC {
        return Err(bad("not a snapshot file"));
    }
    if crc32c::crc32c(&h[..28]) != u32::from_le_bytes(h[28..32].try_into().expect("4 bytes")) {
        return Err(bad("checksum mismatch"));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(Error::UnsupportedFormatVersion {
            path: path.to_path_buf(),
            found: version,
            supported: VERSION,
        });
    }
    let found = SchemeKind::from_tag(h[16]);
    if found != Some(scheme) {
        return Err(bad(&format!(
            "written by scheme {:?}, read by {}",
            found.map(SchemeKind::name),
            scheme.name()
        )));
    }
    Ok(u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")))
}

/// What a finished file holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub records: u64,
    pub rows: u64,
    /// The file's length.
    pub bytes: u64,
    pub syncs: u64,
}

/// Writes one snapshot file, front to back.
pub struct SnapshotWriter {
    file: Arc<dyn StorageFile>,
    /// Frames not yet written to the file.
    buf: Vec<u8>,
    /// The file offset `buf` starts at.
    buf_at: u64,
    /// File length known durable (the watermark of new frames).
    synced: u64,
    records: u64,
    rows: u64,
    syncs: u64,
}

impl SnapshotWriter {
    /// Create `path` (which must not exist) for `scheme`'s part `part`.
    pub fn create(
        storage: &dyn Storage,
        path: &Path,
        scheme: SchemeKind,
        part: u32,
    ) -> Result<Self> {
        let file = storage.open(path, OpenMode::CreateNew)?;
        file.write_at(&encode_header(scheme, part), 0)?;
        Ok(SnapshotWriter {
            file,
            buf: Vec::with_capacity(WRITE_CHUNK + frame::MAX_LEN / 16),
            buf_at: HEADER_SIZE,
            synced: 0,
            records: 0,
            rows: 0,
            syncs: 0,
        })
    }

    fn record(&mut self, body: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        let watermark = LogPos::new(self.synced.saturating_sub(HEADER_SIZE));
        let start = frame::begin(&mut self.buf, watermark);
        body(&mut self.buf);
        frame::seal(&mut self.buf, start);
        let position = self.buf_at + start as u64 - HEADER_SIZE;
        frame::place_at(&mut self.buf[start..], LogPos::new(position));
        self.records += 1;
        if self.buf.len() >= WRITE_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Write what is buffered; sync if [`SYNC_EVERY`] bytes are unsynced.
    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.write_at(&self.buf, self.buf_at)?;
            self.buf_at += self.buf.len() as u64;
            self.buf.clear();
        }
        if self.buf_at - self.synced.max(HEADER_SIZE) >= SYNC_EVERY {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.file.sync_data()?;
        self.synced = self.buf_at;
        self.syncs += 1;
        Ok(())
    }

    /// The file's length so far, buffered frames included.
    pub fn written_len(&self) -> u64 {
        self.buf_at + self.buf.len() as u64
    }

    /// A row of table (or index) `table`; rows of one table are written
    /// in key order.
    pub fn row(&mut self, table: u32, tid: Tid, key: &[u8], value: &[u8]) -> Result<()> {
        self.rows += 1;
        self.record(|out| {
            out.push(KIND_ROW);
            frame::put_vint(out, table as u64);
            frame::put_vint(out, tid.get());
            frame::put_vint(out, key.len() as u64);
            out.extend_from_slice(key);
            frame::put_vint(out, value.len() as u64);
            out.extend_from_slice(value);
        })
    }

    pub fn table(&mut self, id: u32, name: &str) -> Result<()> {
        self.record(|out| {
            out.push(KIND_TABLE);
            frame::put_vint(out, id as u64);
            put_text(out, name);
        })
    }

    pub fn index(&mut self, id: u32, name: &str, table: &str, stale: bool) -> Result<()> {
        self.record(|out| {
            out.push(KIND_INDEX);
            frame::put_vint(out, id as u64);
            out.push(stale as u8);
            put_text(out, name);
            put_text(out, table);
        })
    }

    /// Table `table`'s rows are in `parts` files.
    pub fn parts(&mut self, table: u32, parts: u32) -> Result<()> {
        self.record(|out| {
            out.push(KIND_PARTS);
            frame::put_vint(out, table as u64);
            frame::put_vint(out, parts as u64);
        })
    }

    /// The scheme's own metadata (`bytes` well below a frame's limit).
    pub fn meta(&mut self, bytes: &[u8]) -> Result<()> {
        self.record(|out| {
            out.push(KIND_META);
            frame::put_vint(out, bytes.len() as u64);
            out.extend_from_slice(bytes);
        })
    }

    /// Write the end record and make the whole file durable (its
    /// directory entry is the caller's: it syncs the directory once for
    /// all its files).
    pub fn finish(mut self) -> Result<Written> {
        let records = self.records;
        self.record(|out| {
            out.push(KIND_END);
            frame::put_vint(out, records);
        })?;
        self.flush()?;
        self.sync()?;
        Ok(Written {
            records,
            rows: self.rows,
            bytes: self.buf_at,
            syncs: self.syncs,
        })
    }
}

fn put_text(out: &mut Vec<u8>, s: &str) {
    frame::put_vint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// The snapshot files' reading of frames, for `logstore::scan`.
struct Records;

fn take<'a>(bytes: &mut &'a [u8], n: u64) -> std::result::Result<&'a [u8], &'static str> {
    let n = usize::try_from(n).map_err(|_| "length out of range")?;
    if bytes.len() < n {
        return Err("record truncated");
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn vint(bytes: &mut &[u8]) -> std::result::Result<u64, &'static str> {
    frame::read_vint(bytes)
}

fn id(bytes: &mut &[u8]) -> std::result::Result<u32, &'static str> {
    u32::try_from(vint(bytes)?).map_err(|_| "id out of range")
}

fn text(bytes: &mut &[u8]) -> std::result::Result<String, &'static str> {
    let n = vint(bytes)?;
    String::from_utf8(take(bytes, n)?.to_vec()).map_err(|_| "name is not UTF-8")
}

impl Payloads for Records {
    type Record<'a> = Record<'a>;
    type Error = &'static str;

    fn plausible(head: &[u8]) -> bool {
        matches!(head.first(), Some(1..=6))
    }

    fn decode<'a>(frame: Frame<'a>) -> std::result::Result<Record<'a>, &'static str> {
        let payload = frame.payload;
        let mut rest = payload;
        let kind = take(&mut rest, 1)?[0];
        let record = match kind {
            KIND_ROW => {
                let table = id(&mut rest)?;
                let tid = Tid::new(vint(&mut rest)?);
                if tid.is_placeholder() {
                    return Err("a row with a placeholder TID");
                }
                let n = vint(&mut rest)?;
                let key = take(&mut rest, n)?;
                let n = vint(&mut rest)?;
                let value = take(&mut rest, n)?;
                Record::Row {
                    table,
                    tid,
                    key,
                    value,
                }
            }
            KIND_TABLE => Record::Table {
                id: id(&mut rest)?,
                name: text(&mut rest)?,
            },
            KIND_INDEX => {
                let id = id(&mut rest)?;
                let stale = match take(&mut rest, 1)?[0] {
                    0 => false,
                    1 => true,
                    _ => return Err("bad stale flag"),
                };
                Record::Index {
                    id,
                    stale,
                    name: text(&mut rest)?,
                    table: text(&mut rest)?,
                }
            }
            KIND_META => {
                let n = vint(&mut rest)?;
                Record::Meta(take(&mut rest, n)?)
            }
            KIND_END => Record::End {
                records: vint(&mut rest)?,
            },
            KIND_PARTS => Record::Parts {
                table: id(&mut rest)?,
                parts: u32::try_from(vint(&mut rest)?).map_err(|_| "part count out of range")?,
            },
            _ => return Err("unknown record kind"),
        };
        frame.check_end(payload.len() - rest.len())?;
        Ok(record)
    }
}

/// What reading a file found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Read {
    pub part: u32,
    pub records: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// A file of a checkpoint or snapshot directory as `waypoint inspect`
/// shows it: path, size, and its rows or why it does not read whole.
pub type ListedFile = (std::path::PathBuf, u64, std::result::Result<u64, String>);

/// The files of a checkpoint or snapshot directory, in name order.
/// Reads only.
pub fn list_dir(storage: &dyn Storage, dir: &Path, scheme: SchemeKind) -> Result<Vec<ListedFile>> {
    let mut names = storage.list_dir(dir)?;
    names.sort();
    Ok(names
        .into_iter()
        .map(|f| {
            let bytes = storage
                .open(&f, OpenMode::ReadOnly)
                .and_then(|h| h.len())
                .unwrap_or(0);
            let rows = read(storage, &f, scheme, &mut |_| Ok(()))
                .map(|r| r.rows)
                .map_err(|e| e.to_string());
            (f, bytes, rows)
        })
        .collect())
}

/// Read the whole file at `path`, written by `scheme`, handing each
/// record but the end to `visit` in file order; refuses a file that is
/// not whole (see the module invariant).
pub fn read(
    storage: &dyn Storage,
    path: &Path,
    scheme: SchemeKind,
    visit: &mut dyn FnMut(Record<'_>) -> Result<()>,
) -> Result<Read> {
    let file = storage.open(path, OpenMode::ReadOnly)?;
    let len = file.len()?;
    let mut header = vec![0u8; HEADER_SIZE.min(len) as usize];
    file.read_at(&mut header, 0)?;
    let part = decode_header(path, &header, scheme)?;
    let corrupt = |offset: u64, detail: String| Error::Corruption {
        path: path.to_path_buf(),
        offset,
        detail,
    };
    let mut out = Read {
        part,
        bytes: len,
        ..Read::default()
    };
    let mut at = HEADER_SIZE;
    let mut buf = Vec::new();
    loop {
        if at >= len {
            return Err(corrupt(at, "the snapshot file ends before its end record".into()));
        }
        let n = (len - at).min(READ_CHUNK);
        buf.resize(n as usize, 0);
        file.read_at(&mut buf, at)?;
        let scanned = scan::scan::<Records>(&buf, LogPos::new(at - HEADER_SIZE));
        if let Some(e) = scanned.end.to_error(path, at) {
            return Err(e);
        }
        for (offset, record) in scanned.records {
            match record {
                Record::End { records } => {
                    let end = at + offset + frame_len_at(&buf, offset);
                    if records != out.records || end != len {
                        return Err(corrupt(
                            at + offset,
                            format!(
                                "end record says {records} records, the file holds {} before it and {} bytes after",
                                out.records,
                                len - end
                            ),
                        ));
                    }
                    return Ok(out);
                }
                other => {
                    out.records += 1;
                    if matches!(other, Record::Row { .. }) {
                        out.rows += 1;
                    }
                    visit(other)?;
                }
            }
        }
        let piece_ended_early = matches!(scanned.end, ScanEnd::TornTail { .. });
        if scanned.valid_len == 0 || (piece_ended_early && at + n >= len) {
            let detail = match scanned.end {
                ScanEnd::TornTail { error, .. } => format!("bad record before the end record: {error}"),
                _ => "the snapshot file ends before its end record".into(),
            };
            return Err(corrupt(at + scanned.valid_len, detail));
        }
        at += scanned.valid_len;
    }
}

/// The length of the (valid) frame at `offset` of `buf`.
fn frame_len_at(buf: &[u8], offset: u64) -> u64 {
    let o = offset as usize;
    u32::from_le_bytes(buf[o + 4..o + 8].try_into().expect("a scanned frame")) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;

    fn write_sample(sim: &SimStorage, path: &Path, rows: u32) -> Written {
        let mut w = SnapshotWriter::create(sim, path, SchemeKind::Silor, 3).unwrap();
        w.table(7, "t").unwrap();
        w.index(8, "t_by_v", "t", true).unwrap();
        w.meta(b"scheme bytes").unwrap();
        for i in 0..rows {
            let value = vec![i as u8; (i % 300) as usize];
            w.row(7, Tid::new(1 << 20 | (i as u64) << 1), &i.to_be_bytes(), &value)
                .unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn a_file_reads_back_record_for_record() {
        let sim = SimStorage::new(1);
        sim.create_dir_all(Path::new("/s")).unwrap();
        let path = Path::new("/s/p000.snap");
        let written = write_sample(&sim, path, 5000);
        assert_eq!(written.rows, 5000);
        assert_eq!(written.records, 5003);
        let mut rows = 0u32;
        let mut catalog = Vec::new();
        let read = read(&sim, path, SchemeKind::Silor, &mut |r| {
            match r {
                Record::Row { table, key, value, .. } => {
                    assert_eq!(table, 7);
                    assert_eq!(key, rows.to_be_bytes());
                    assert_eq!(value.len(), (rows % 300) as usize);
                    rows += 1;
                }
                other => catalog.push(format!("{other:?}")),
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(rows, 5000);
        assert_eq!(read.part, 3);
        assert_eq!(read.bytes, written.bytes);
        assert_eq!(catalog.len(), 3, "{catalog:?}");
        // Another scheme's reader refuses it.
        assert!(read_all(&sim, path, SchemeKind::Command).is_err());
    }

    fn read_all(sim: &SimStorage, path: &Path, scheme: SchemeKind) -> Result<Read> {
        read(sim, path, scheme, &mut |_| Ok(()))
    }

    #[test]
    fn a_short_or_damaged_file_is_corruption() {
        let sim = SimStorage::new(2);
        sim.create_dir_all(Path::new("/s")).unwrap();
        let path = Path::new("/s/p.snap");
        let written = write_sample(&sim, path, 400);
        let whole = sim.read_current(path).unwrap();
        // Cut before the end record: not whole.
        let cut = Path::new("/s/cut.snap");
        let f = sim.open(cut, OpenMode::CreateNew).unwrap();
        f.write_at(&whole[..whole.len() - 16], 0).unwrap();
        assert!(matches!(
            read_all(&sim, cut, SchemeKind::Silor),
            Err(Error::Corruption { .. })
        ));
        // A flipped byte in the middle.
        sim.corrupt(path, written.bytes / 2, 0x40).unwrap();
        assert!(matches!(
            read_all(&sim, path, SchemeKind::Silor),
            Err(Error::Corruption { .. })
        ));
    }
}
