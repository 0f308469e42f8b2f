//! The command log's records (seed 001 §III-A): one per committed call of
//! a stored procedure, with its sequence number (the position of the call
//! in the serial order), the procedure's name and its encoded parameters,
//! and nothing of what it wrote; and one per catalog change, in the value
//! log's catalog entry format (`silor::entry`, reused as is). Framed by
//! `logstore::frame` like every log record (docs/FORMAT.md, "Command log
//! records").
//!
//! ```text
//! call:    [5][flags: u8][sequence: vint][name len: vint][name][params len: vint][params]
//!          ([digest: u32 LE] if flags & 1)
//!          flags: 1 = write-set digest follows (`CommandOptions::digests`),
//!                 2 = barrier (replayed alone, `procedure::partition::is_barrier`);
//!                 other bits must be zero
//! catalog: the value log's catalog entry ([2][epoch = 0: vint][change]...)
//! ```
//!
//! Read, never written any more (logs from before parallel replay):
//! kind 3, a call without flags (`[3][sequence]...[params]`), and kind 4,
//! the same with its digest after the parameters. Whether such a call
//! was a barrier was not recorded, so it reads as one (replayed alone:
//! always sound).
//!
//! The digest is CRC32C over the write set in (table, key) order, each
//! write as `[table: u32 LE][key len: vint][key][0 | 1 value len: vint
//! value]` (0: a delete): the rows the call wrote, not the secondary-index
//! entries derived from them, nor TIDs.
//!
//! Invariant: decoding is total: any bytes give a record or an error,
//! never a panic; a record fills its frame's payload exactly.

use crate::ids::LogPos;
use crate::logstore::frame::{self, Frame};
use crate::logstore::scan::Payloads;
use crate::persist::{CatalogChange, WriteSet};
use crate::silor::entry::{self, DecodeError, Entries, Entry};

/// A call of an older log, without flags (read only).
const KIND_CALL_OLD: u8 = 3;
/// A call of an older log followed by its write-set digest (read only).
const KIND_CALL_DIGEST_OLD: u8 = 4;
/// A call with its flags.
const KIND_CALL: u8 = 5;
const FLAG_DIGEST: u8 = 1;
const FLAG_BARRIER: u8 = 2;
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
        /// Replayed alone (see the module documentation).
        barrier: bool,
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

/// What a call's record holds besides its name and parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallFlags {
    /// The write-set digest.
    pub digest: Option<u32>,
    /// Replayed alone.
    pub barrier: bool,
}

/// Append the framed record of call `sequence` to `out`, for a stream
/// durable up to `watermark`.
pub fn encode_call(
    out: &mut Vec<u8>,
    watermark: LogPos,
    sequence: u64,
    name: &str,
    params: &[u8],
    flags: CallFlags,
) {
    let start = frame::begin(out, watermark);
    out.push(KIND_CALL);
    let digest = flags.digest;
    out.push(
        if digest.is_some() { FLAG_DIGEST } else { 0 }
            | if flags.barrier { FLAG_BARRIER } else { 0 },
    );
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
            Some(&KIND_CALL) | Some(&KIND_CALL_OLD) | Some(&KIND_CALL_DIGEST_OLD) | Some(&KIND_CATALOG)
        )
    }

    fn decode<'a>(frame: Frame<'a>) -> Result<Record<'a>, DecodeError> {
        let payload = frame.payload;
        // (body offset, digest follows, barrier)
        let (at, with_digest, barrier) = match payload.first() {
            Some(&KIND_CALL) => {
                let flags = *payload.get(1).ok_or(DecodeError("record truncated"))?;
                if flags & !(FLAG_DIGEST | FLAG_BARRIER) != 0 {
                    return Err(DecodeError("unknown call flags"));
                }
                (2, flags & FLAG_DIGEST != 0, flags & FLAG_BARRIER != 0)
            }
            // Not recorded by older logs: replayed alone, always sound.
            Some(&KIND_CALL_OLD) => (1, false, true),
            Some(&KIND_CALL_DIGEST_OLD) => (1, true, true),
            Some(&KIND_CATALOG) => {
                return match Entries::decode(frame)? {
                    Entry::Catalog { change, .. } => Ok(Record::Catalog(change)),
                    Entry::Commit { .. } => Err(DecodeError("a value-log commit in a command log")),
                }
            }
            _ => return Err(DecodeError("unknown record kind")),
        };
        let mut rest = &payload[at..];
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
            barrier,
        })
    }
}
