//! The command log's records (seed 001 §III-A): one per committed call of
//! a stored procedure, with its sequence number (the position of the call
//! in the serial order), the procedure's name and its encoded parameters,
//! and nothing of what it wrote; and one per catalog change, in the value
//! log's catalog entry format (`silor::entry`, reused as is). Framed by
//! `logstore::frame` like every log record (docs/FORMAT.md, "Command log
//! records").
//!
//! ```text
//! call:    [3][sequence: vint][name len: vint][name][params len: vint][params]
//! call with its write-set digest (`CommandOptions::digests`):
//!          [4][sequence: vint][name len: vint][name][params len: vint][params][digest: u32 LE]
//! catalog: the value log's catalog entry ([2][epoch = 0: vint][change]...)
//! ```
//!
//! The digest is CRC32C over the write set in (table, key) order, each
//! write as `[table: u32 LE][key len: vint][key][0 | 1 value len: vint
//! value]` (0: a delete): the rows the call wrote, not the secondary-index
//! entries derived from them, nor TIDs.
//!
//! ```text
//! ```
//!
//! Invariant: decoding is total: any bytes give a record or an error,
//! never a panic; a record fills its frame's payload exactly.

use crate::ids::LogPos;
use crate::logstore::frame::{self, Frame};
use crate::logstore::scan::Payloads;
use crate::persist::{CatalogChange, WriteSet};
use crate::silor::entry::{self, DecodeError, Entries, Entry};

const KIND_CALL: u8 = 3;
/// A call followed by its write-set digest.
const KIND_CALL_DIGEST: u8 = 4;
/// The value log's catalog entry kind.
const KIND_CATALOG: u8 = 2;

/// A decoded record, borrowing from the scanned segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Call {
        sequence: u64,
        name: &'a str,
        params: &'a [u8],
        /// The write-set digest, if the call was logged with one.
        digest: Option<u32>,
    },
    Catalog(CatalogChange),
}

/// The digest of a write set (see the module documentation).
pub fn write_set_digest(writes: &dyn WriteSet) -> u32 {
    let mut crc = 0u32;
    let mut head = Vec::with_capacity(24);
    writes.for_each(&mut |w| {
        head.clear();
        head.extend_from_slice(&w.table.to_le_bytes());
        frame::put_vint(&mut head, w.key.len() as u64);
        crc = crc32c::crc32c_append(crc32c::crc32c_append(crc, &head), w.key);
        head.clear();
        match w.value {
            None => head.push(0),
            Some(v) => {
                head.push(1);
                frame::put_vint(&mut head, v.len() as u64);
            }
        }
        crc = crc32c::crc32c_append(crc, &head);
        if let Some(v) = w.value {
            crc = crc32c::crc32c_append(crc, v);
        }
    });
    crc
}

/// Append the framed record of call `sequence` to `out`, for a stream
/// durable up to `watermark`, with its write-set digest if given.
pub fn encode_call(
    out: &mut Vec<u8>,
    watermark: LogPos,
    sequence: u64,
    name: &str,
    params: &[u8],
    digest: Option<u32>,
) {
    let start = frame::begin(out, watermark);
    out.push(if digest.is_some() {
        KIND_CALL_DIGEST
    } else {
        KIND_CALL
    });
    frame::put_vint(out, sequence);
    frame::put_vint(out, name.len() as u64);
    out.extend_from_slice(name.as_bytes());
    frame::put_vint(out, params.len() as u64);
    out.extend_from_slice(params);
    if let Some(d) = digest {
        out.extend_from_slice(&d.to_le_bytes());
    }
    frame::seal(out, start);
}

/// Append the framed record of a catalog change.
pub fn encode_catalog(out: &mut Vec<u8>, watermark: LogPos, change: &CatalogChange) {
    entry::encode_catalog(out, watermark, 0, change);
}

fn take<'a>(bytes: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let n = frame::read_vint(bytes).map_err(DecodeError)?;
    let n = usize::try_from(n).map_err(|_| DecodeError("length out of range"))?;
    if bytes.len() < n {
        return Err(DecodeError("record truncated"));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

/// The command log's reading of frames, for `logstore::scan`.
pub struct Records;

impl Payloads for Records {
    type Record<'a> = Record<'a>;
    type Error = DecodeError;

    fn plausible(head: &[u8]) -> bool {
        matches!(
            head.first(),
            Some(&KIND_CALL) | Some(&KIND_CALL_DIGEST) | Some(&KIND_CATALOG)
        )
    }

    fn decode<'a>(frame: Frame<'a>) -> Result<Record<'a>, DecodeError> {
        let payload = frame.payload;
        let with_digest = match payload.first() {
            Some(&KIND_CALL) => false,
            Some(&KIND_CALL_DIGEST) => true,
            Some(&KIND_CATALOG) => {
                return match Entries::decode(frame)? {
                    Entry::Catalog { change, .. } => Ok(Record::Catalog(change)),
                    Entry::Commit { .. } => Err(DecodeError("a value-log commit in a command log")),
                }
            }
            _ => return Err(DecodeError("unknown record kind")),
        };
        let mut rest = &payload[1..];
        let sequence = frame::read_vint(&mut rest).map_err(DecodeError)?;
        if sequence == 0 {
            return Err(DecodeError("a call with sequence number 0"));
        }
        let name = std::str::from_utf8(take(&mut rest)?)
            .map_err(|_| DecodeError("procedure name is not UTF-8"))?;
        let params = take(&mut rest)?;
        let digest = if with_digest {
            let (d, tail) = rest
                .split_first_chunk::<4>()
                .ok_or(DecodeError("record truncated"))?;
            rest = tail;
            Some(u32::from_le_bytes(*d))
        } else {
            None
        };
        frame
            .check_end(payload.len() - rest.len())
            .map_err(DecodeError)?;
        Ok(Record::Call {
            sequence,
            name,
            params,
            digest,
        })
    }
}
