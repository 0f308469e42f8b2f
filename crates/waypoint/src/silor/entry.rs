//! The value log's entries (seed 002 §4.1): one per committed transaction,
//! its TID and its write set as (table, key, value or tombstone), with no
//! page ids and no before-images, then the secondary-index entries it
//! added or removed (as writes to the index's id: the extractors are code
//! a recovery cannot run); and one per catalog change, with the
//! epoch it was logged in. Framed by `logstore::frame` like every log
//! record (docs/FORMAT.md, "Value log entries").
//!
//! ```text
//! commit:  [1][tid: vint][writes: vint] then per write
//!          [table: vint][key len: vint][key][0 = tombstone | 1 = value]
//!          ([value len: vint][value])
//! catalog: [2][epoch: vint][change: 1 create table, 2 create index,
//!          3 drop table, 4 drop index][id: vint][name len: vint][name]
//!          [table len: vint][table]
//! ```
//!
//! Invariant: decoding is total: any bytes give an entry or an error,
//! never a panic; an entry fills its frame's payload exactly.

use crate::ids::{LogPos, Tid};
use crate::logstore::frame::{self, Frame};
use crate::logstore::scan::Payloads;
use crate::persist::{CatalogChange, IndexWrite, WriteSet};

const KIND_COMMIT: u8 = 1;
const KIND_CATALOG: u8 = 2;

/// One write of a logged commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write<'a> {
    pub table: u32,
    pub key: &'a [u8],
    /// `None`: a tombstone (the key was deleted).
    pub value: Option<&'a [u8]>,
}

/// A decoded entry, borrowing from the scanned segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a> {
    Commit { tid: Tid, writes: Vec<Write<'a>> },
    Catalog { epoch: u64, change: CatalogChange },
}

impl Entry<'_> {
    /// The epoch the entry belongs to: a commit's TID's, a catalog
    /// change's own.
    pub fn epoch(&self) -> u64 {
        match self {
            Entry::Commit { tid, .. } => tid.epoch(),
            Entry::Catalog { epoch, .. } => *epoch,
        }
    }
}

/// Why a checksum-valid payload is not an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Append the framed commit entry of `tid` and `writes` to `out`, for a
/// stream durable up to `watermark`; the secondary-index entries it
/// changed follow as writes to the index's id (an empty value, or a
/// tombstone).
pub fn encode_commit(
    out: &mut Vec<u8>,
    watermark: LogPos,
    tid: Tid,
    writes: &dyn WriteSet,
    index_writes: &[IndexWrite],
) {
    fn put(out: &mut Vec<u8>, table: u32, key: &[u8], value: Option<&[u8]>) {
        frame::put_vint(out, table as u64);
        frame::put_vint(out, key.len() as u64);
        out.extend_from_slice(key);
        match value {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                frame::put_vint(out, v.len() as u64);
                out.extend_from_slice(v);
            }
        }
    }
    let start = frame::begin(out, watermark);
    out.push(KIND_COMMIT);
    frame::put_vint(out, tid.get());
    frame::put_vint(out, (writes.len() + index_writes.len()) as u64);
    writes.for_each(&mut |w| put(out, w.table, w.key, w.value));
    for w in index_writes {
        put(out, w.index, &w.key, w.present.then_some(&[][..]));
    }
    frame::seal(out, start);
}

/// Append the framed entry of a catalog change logged in `epoch`.
pub fn encode_catalog(out: &mut Vec<u8>, watermark: LogPos, epoch: u64, change: &CatalogChange) {
    let start = frame::begin(out, watermark);
    out.push(KIND_CATALOG);
    frame::put_vint(out, epoch);
    let (kind, id, name, table) = match change {
        CatalogChange::CreateTable { name, id } => (1, *id, name.as_str(), ""),
        CatalogChange::CreateIndex { name, id, table } => (2, *id, name.as_str(), table.as_str()),
        CatalogChange::DropTable { name } => (3, 0, name.as_str(), ""),
        CatalogChange::DropIndex { name } => (4, 0, name.as_str(), ""),
    };
    out.push(kind);
    frame::put_vint(out, id as u64);
    for s in [name, table] {
        frame::put_vint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
    frame::seal(out, start);
}

/// The value log's reading of frames, for `logstore::scan`.
pub struct Entries;

fn take<'a>(bytes: &mut &'a [u8], n: u64) -> Result<&'a [u8], DecodeError> {
    let n = usize::try_from(n).map_err(|_| DecodeError("length out of range"))?;
    if bytes.len() < n {
        return Err(DecodeError("entry truncated"));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn vint(bytes: &mut &[u8]) -> Result<u64, DecodeError> {
    frame::read_vint(bytes).map_err(DecodeError)
}

fn byte(bytes: &mut &[u8]) -> Result<u8, DecodeError> {
    Ok(take(bytes, 1)?[0])
}

fn u32_of(v: u64) -> Result<u32, DecodeError> {
    u32::try_from(v).map_err(|_| DecodeError("id out of range"))
}

fn text(bytes: &mut &[u8]) -> Result<String, DecodeError> {
    let n = vint(bytes)?;
    let raw = take(bytes, n)?;
    String::from_utf8(raw.to_vec()).map_err(|_| DecodeError("name is not UTF-8"))
}

impl Payloads for Entries {
    type Record<'a> = Entry<'a>;
    type Error = DecodeError;

    fn plausible(head: &[u8]) -> bool {
        matches!(head.first(), Some(&KIND_COMMIT) | Some(&KIND_CATALOG))
    }

    fn decode<'a>(frame: Frame<'a>) -> Result<Entry<'a>, DecodeError> {
        let payload = frame.payload;
        let mut rest = payload;
        let entry = match byte(&mut rest)? {
            KIND_COMMIT => {
                let tid = Tid::new(vint(&mut rest)?);
                if !tid.is_committed() || tid == Tid::ZERO {
                    return Err(DecodeError("a commit entry without a committed TID"));
                }
                let count = vint(&mut rest)?;
                // Each write takes at least three bytes: bound the
                // allocation by what the payload can hold.
                if count > rest.len() as u64 / 3 {
                    return Err(DecodeError("more writes than the entry holds"));
                }
                let mut writes = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let table = u32_of(vint(&mut rest)?)?;
                    let n = vint(&mut rest)?;
                    let key = take(&mut rest, n)?;
                    let value = match byte(&mut rest)? {
                        0 => None,
                        1 => {
                            let n = vint(&mut rest)?;
                            Some(take(&mut rest, n)?)
                        }
                        _ => return Err(DecodeError("unknown write kind")),
                    };
                    writes.push(Write { table, key, value });
                }
                Entry::Commit { tid, writes }
            }
            KIND_CATALOG => {
                let epoch = vint(&mut rest)?;
                let kind = byte(&mut rest)?;
                let id = u32_of(vint(&mut rest)?)?;
                let name = text(&mut rest)?;
                let table = text(&mut rest)?;
                let change = match kind {
                    1 => CatalogChange::CreateTable { name, id },
                    2 => CatalogChange::CreateIndex { name, id, table },
                    3 => CatalogChange::DropTable { name },
                    4 => CatalogChange::DropIndex { name },
                    _ => return Err(DecodeError("unknown catalog change")),
                };
                Entry::Catalog { epoch, change }
            }
            _ => return Err(DecodeError("unknown entry kind")),
        };
        frame
            .check_end(payload.len() - rest.len())
            .map_err(DecodeError)?;
        Ok(entry)
    }
}
