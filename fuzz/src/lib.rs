//! Helpers shared by the fuzz targets in `fuzz_targets/`.
//!
//! - [`ArbRecord`]: a log record built from fuzz input with `arbitrary`,
//!   normalised so [`waypoint::wal::record::encode`] accepts it (its
//!   documented preconditions), for the round-trip properties.
//! - [`fix_record_checksums`]: rewrites the CRC32C of every record framed in
//!   a buffer, so the fuzzer reaches the checks behind the checksum (kind,
//!   flags, payload lengths, padding; in recovery: analysis, redo and undo of
//!   checksum-valid but nonsensical records) instead of stopping at
//!   `BadChecksum` on almost every input.

use arbitrary::{Arbitrary, Unstructured};
use waypoint::logstore::frame::{self, MAX_LEN as MAX_RECORD_LEN, MIN_LEN as MIN_RECORD_LEN};
use waypoint::wal::record::{
    self, Deps, PageImage, Record, RecordBody, RecordHeader, Span, UpdateDiff, MAX_IMAGE_BODY,
};
use waypoint::{Gsn, LogPos, Tid};

/// The payload of a log record, owned.
#[derive(Debug, Clone, Arbitrary)]
pub enum ArbBody {
    Insert {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Update {
        key: Vec<u8>,
        offset: u32,
        before: Vec<u8>,
        after: Vec<u8>,
    },
    Remove {
        key: Vec<u8>,
        before: Vec<u8>,
    },
    Image {
        head: Vec<u8>,
        zero_run: u32,
        tail: Vec<u8>,
    },
    Commit {
        tid: u64,
        #[arbitrary(with = arbitrary_deps)]
        deps: Vec<(u32, LogPos)>,
    },
    End,
    Freed,
    Split {
        at: u32,
        separator: Vec<u8>,
    },
    Separator {
        separator: Vec<u8>,
        left: u64,
        right: u64,
    },
}

/// A commit record's dependency vector from fuzz input: (partition,
/// stream position) pairs.
fn arbitrary_deps(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<(u32, LogPos)>> {
    let raw: Vec<(u32, u64)> = u.arbitrary()?;
    Ok(raw
        .into_iter()
        .map(|(p, pos)| (p, LogPos::new(pos)))
        .collect())
}

/// A log record, owned: the header fields `encode` takes plus the payload.
#[derive(Debug, Clone, Arbitrary)]
pub struct ArbRecord {
    pub page_kind: u8,
    pub tree: u32,
    pub gsn: u64,
    pub txn: u64,
    pub page: u64,
    pub prev_gsn: u64,
    pub compensation: bool,
    pub smo_more: bool,
    pub watermark: u64,
    pub body: ArbBody,
}

impl ArbRecord {
    /// Clamp the fields to what `encode` documents as valid input (keys fit a
    /// u16, an image body is at most `MAX_IMAGE_BODY`, the record at most
    /// `MAX_RECORD_LEN`, page kind nonzero exactly on images, no page fields
    /// on commit and end records, the structure-modification flag only on
    /// the structural kinds: images, freed pages, splits, separators). Everything `encode` accepts must decode back.
    pub fn normalise(&mut self) {
        fn clamp(v: &mut Vec<u8>, max: usize) {
            v.truncate(max);
        }
        // Each byte string stays well below MAX_RECORD_LEN / 4 so the sum,
        // with the header and the payload's integers (under 200 bytes),
        // fits a record; fuzz inputs are far smaller anyway.
        let quarter = MAX_RECORD_LEN / 4 - 200;
        match &mut self.body {
            ArbBody::Insert { key, value } => {
                clamp(key, u16::MAX as usize);
                clamp(value, quarter);
            }
            ArbBody::Update {
                key, before, after, ..
            } => {
                clamp(key, u16::MAX as usize);
                clamp(before, quarter);
                clamp(after, quarter);
            }
            ArbBody::Remove { key, before } => {
                clamp(key, u16::MAX as usize);
                clamp(before, quarter);
            }
            ArbBody::Image {
                head,
                zero_run,
                tail,
            } => {
                clamp(head, MAX_IMAGE_BODY);
                clamp(tail, MAX_IMAGE_BODY - head.len());
                let room = (MAX_IMAGE_BODY - head.len() - tail.len()) as u32;
                *zero_run = (*zero_run).min(room);
            }
            ArbBody::Commit { deps, .. } => {
                deps.truncate(quarter / 12);
            }
            ArbBody::End | ArbBody::Freed => {}
            ArbBody::Split { separator, .. } | ArbBody::Separator { separator, .. } => {
                clamp(separator, u16::MAX as usize);
            }
        }
        let is_image = matches!(self.body, ArbBody::Image { .. });
        let structural = matches!(
            self.body,
            ArbBody::Image { .. }
                | ArbBody::Freed
                | ArbBody::Split { .. }
                | ArbBody::Separator { .. }
        );
        let has_page = !matches!(self.body, ArbBody::Commit { .. } | ArbBody::End);
        if is_image {
            self.page_kind = self.page_kind.max(1);
        } else {
            self.page_kind = 0;
        }
        if !structural {
            self.smo_more = false;
        }
        if !has_page {
            self.tree = 0;
            self.page = 0;
            self.prev_gsn = 0;
        }
    }

    pub fn header(&self) -> RecordHeader {
        RecordHeader {
            page_kind: self.page_kind,
            tree: self.tree,
            gsn: Gsn::new(self.gsn),
            txn: self.txn,
            page: self.page,
            prev_gsn: Gsn::new(self.prev_gsn),
            compensation: self.compensation,
            smo_more: self.smo_more,
            watermark: LogPos::new(self.watermark),
        }
    }

    pub fn body(&self) -> RecordBody<'_> {
        match &self.body {
            ArbBody::Insert { key, value } => RecordBody::Insert { key, value },
            ArbBody::Update {
                key,
                offset,
                before,
                after,
            } => RecordBody::Update {
                key,
                diff: UpdateDiff::single(Span {
                    offset: *offset,
                    before,
                    after,
                }),
            },
            ArbBody::Remove { key, before } => RecordBody::Remove { key, before },
            ArbBody::Image {
                head,
                zero_run,
                tail,
            } => RecordBody::Image(PageImage {
                head,
                zero_run: *zero_run,
                tail,
            }),
            ArbBody::Commit { tid, deps } => RecordBody::Commit {
                tid: Tid::new(*tid),
                deps: Deps::new(deps),
            },
            ArbBody::End => RecordBody::End,
            ArbBody::Freed => RecordBody::Freed,
            ArbBody::Split { at, separator } => RecordBody::Split { at: *at, separator },
            ArbBody::Separator {
                separator,
                left,
                right,
            } => RecordBody::Separator {
                separator,
                left: *left,
                right: *right,
            },
        }
    }

    pub fn record(&self) -> Record<'_> {
        Record {
            header: self.header(),
            body: self.body(),
        }
    }

    /// Append the encoded record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        record::encode(&self.header(), &self.body(), out);
    }
}

/// Rewrite the checksum of each record framed from the start of `buf`,
/// which lies at stream position `position`: at each offset whose length
/// field is plausible (16..=16 MiB, a multiple of 8, inside `buf`), store
/// the CRC32C of the record's bytes 4..len, placed at its position
/// (`frame::place_at`), and step over it; stop at the first implausible
/// length. Returns how many records were sealed.
pub fn fix_record_checksums(buf: &mut [u8], position: u64) -> usize {
    let mut pos = 0usize;
    let mut sealed = 0;
    while pos + MIN_RECORD_LEN <= buf.len() {
        let len = u32::from_le_bytes(buf[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if !(MIN_RECORD_LEN..=MAX_RECORD_LEN).contains(&len)
            || !len.is_multiple_of(8)
            || len > buf.len() - pos
        {
            break;
        }
        let crc = crc32c::crc32c(&buf[pos + 4..pos + len]);
        buf[pos..pos + 4].copy_from_slice(&crc.to_le_bytes());
        frame::place_at(
            &mut buf[pos..pos + len],
            LogPos::new(position.wrapping_add(pos as u64)),
        );
        pos += len;
        sealed += 1;
    }
    sealed
}

/// Check the records that decoded from `buf` are canonical: encoding a
/// decoded record again gives back exactly the bytes it was decoded from
/// (the format has one encoding per record, see docs/FORMAT.md), once
/// placed at the stream position `position` the bytes were read at.
pub fn assert_reencodes(bytes: &[u8], rec: &Record<'_>, position: u64) {
    let len = rec.encoded_len();
    assert!(len <= bytes.len(), "decoded record longer than its input");
    let mut again = Vec::with_capacity(len);
    record::encode(&rec.header, &rec.body, &mut again);
    assert_eq!(again.len(), len, "encoded_len disagrees with encode");
    frame::place_at(&mut again, LogPos::new(position));
    assert!(
        again == bytes[..len],
        "a decoded record re-encodes to other bytes"
    );
}

/// Page sizes the engine accepts, chosen by one byte.
pub fn page_size_from(b: u8) -> usize {
    4096 << (b % 5)
}
