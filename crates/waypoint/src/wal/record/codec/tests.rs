//! The codec's tests: round trips of every kind, the errors decoding
//! names, totality, and the WAL's records on the segment scan.

use super::*;
use crate::ids::{Gsn, LogPos};
use crate::logstore::scan::ScanEnd;
use crate::wal::record::encode_update;
use crate::wal::record::image::tests::page_body;
use proptest::prelude::*;

/// An owned record, so strategies can generate them.
#[derive(Debug, Clone)]
enum Owned {
    Insert(Vec<u8>, Vec<u8>),
    Update(Vec<u8>, Vec<u8>, Vec<u8>),
    Remove(Vec<u8>, Vec<u8>),
    Image(Vec<u8>),
    Commit(u64, Vec<(u32, LogPos)>),
    End,
    Freed,
    Split(u32, Vec<u8>),
    Separator(Vec<u8>, u64, u64),
}

impl Owned {
    fn body(&self) -> RecordBody<'_> {
        match self {
            Owned::Insert(k, v) => RecordBody::Insert { key: k, value: v },
            Owned::Update(k, old, new) => RecordBody::Update {
                key: k,
                diff: encode_update(old, new),
            },
            Owned::Remove(k, v) => RecordBody::Remove { key: k, before: v },
            Owned::Image(body) => RecordBody::Image(PageImage::from_body(body)),
            Owned::Commit(tid, deps) => RecordBody::Commit {
                tid: Tid::new(*tid),
                deps: Deps::new(deps),
            },
            Owned::End => RecordBody::End,
            Owned::Freed => RecordBody::Freed,
            Owned::Split(at, sep) => RecordBody::Split {
                at: *at,
                separator: sep,
            },
            Owned::Separator(sep, left, right) => RecordBody::Separator {
                separator: sep,
                left: *left,
                right: *right,
            },
        }
    }

    fn header(&self, gsn: u64, watermark: u64) -> RecordHeader {
        let page = !matches!(self, Owned::Commit(..) | Owned::End);
        let image = matches!(self, Owned::Image(_));
        RecordHeader {
            // BtreeLeaf or BtreeInner.
            page_kind: if image { 2 + (gsn % 2) as u8 } else { 0 },
            tree: if page { (gsn % 1000) as u32 * 3 + 1 } else { 0 },
            gsn: Gsn::new(gsn),
            txn: gsn / 3 + 1,
            page: if page { gsn * 7 + 2 } else { 0 },
            prev_gsn: Gsn::new(if page { gsn.saturating_sub(5) } else { 0 }),
            compensation: gsn % 4 == 1,
            smo_more: self.body().kind().is_structural() && gsn.is_multiple_of(3),
            watermark: LogPos::new(watermark),
        }
    }
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn owned() -> impl Strategy<Value = Owned> {
    prop_oneof![
        (bytes(40), bytes(100)).prop_map(|(k, v)| Owned::Insert(k, v)),
        (bytes(40), bytes(100), bytes(100)).prop_map(|(k, o, n)| Owned::Update(k, o, n)),
        (bytes(40), bytes(100)).prop_map(|(k, v)| Owned::Remove(k, v)),
        page_body().prop_map(Owned::Image),
        (
            any::<u64>(),
            prop::collection::vec(any::<(u32, u64)>(), 0..6)
        )
            .prop_map(|(t, d)| {
                let d = d.into_iter().map(|(p, pos)| (p, LogPos::new(pos))).collect();
                Owned::Commit(t, d)
            }),
        Just(Owned::End),
        Just(Owned::Freed),
        (any::<u32>(), bytes(40)).prop_map(|(at, k)| Owned::Split(at, k)),
        (bytes(40), any::<u64>(), any::<u64>()).prop_map(|(k, l, r)| Owned::Separator(k, l, r)),
    ]
}

/// Encode `records` as a segment starting at stream position 0, each
/// record with watermark = its own offset (everything before it was
/// durable when it was appended); returns the bytes and each record's
/// offset.
fn segment(records: &[Owned]) -> (Vec<u8>, Vec<usize>) {
    segment_with(records, 0, |_, offset| offset as u64)
}

/// Encode `records` as a segment starting at stream position `base`,
/// with watermark `watermark(index, offset)`.
fn segment_with(
    records: &[Owned],
    base: u64,
    watermark: impl Fn(usize, usize) -> u64,
) -> (Vec<u8>, Vec<usize>) {
    let mut buf = Vec::new();
    let mut offsets = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let offset = buf.len();
        offsets.push(offset);
        let header = r.header(i as u64 + 1, watermark(i, offset));
        encode(&header, &r.body(), &mut buf);
    }
    frame::place_at(&mut buf, LogPos::new(base));
    (buf, offsets)
}

/// The scan returned exactly the first `n` records, as [`segment`]
/// encoded them (watermark = offset) and at their offsets.
fn assert_prefix(scan: &SegmentScan, records: &[Owned], offsets: &[usize], n: usize) {
    assert_eq!(scan.records.len(), n, "records returned");
    for (i, (off, rec)) in scan.records.iter().enumerate() {
        assert_eq!(*off as usize, offsets[i]);
        assert_eq!(
            rec.header,
            records[i].header(i as u64 + 1, offsets[i] as u64)
        );
        assert_eq!(rec.body, records[i].body());
    }
}

/// A fixed segment with one record of every kind (last: an update).
fn sample() -> Vec<Owned> {
    let mut image = vec![7u8; 100];
    image.resize(4000, 0);
    image.extend([9u8; 96]);
    vec![
        Owned::Insert(b"alpha".to_vec(), b"one".to_vec()),
        Owned::Image(image),
        Owned::Remove(b"beta".to_vec(), b"gone value".to_vec()),
        Owned::Commit(99, vec![(1, LogPos::new(4096)), (3, LogPos::new(80))]),
        Owned::End,
        Owned::Freed,
        Owned::Split(17, b"delta".to_vec()),
        Owned::Separator(b"epsilon".to_vec(), 12, 13),
        Owned::Update(
            b"gamma".to_vec(),
            b"hello world".to_vec(),
            b"hello there world".to_vec(),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_kind_round_trips(
        rec in owned(),
        gsn in any::<u64>(),
        page_kind in 1u8..,
        tree in any::<u32>(),
        watermark in any::<u64>(),
        (txn, page, prev_gsn) in any::<(u64, u64, u64)>(),
        junk in bytes(20),
    ) {
        let body = rec.body();
        let kind = body.kind();
        // Any values: the header's differences (transaction start to
        // watermark, GSN to prev GSN) hold for all of them.
        let header = RecordHeader {
            gsn: Gsn::new(gsn),
            txn,
            page_kind: if kind == RecordKind::Image { page_kind } else { 0 },
            tree: if kind.has_page() { tree } else { 0 },
            page: if kind.has_page() { page } else { 0 },
            prev_gsn: Gsn::new(if kind.has_page() { prev_gsn } else { 0 }),
            watermark: LogPos::new(watermark),
            ..rec.header(gsn % 1000, 0)
        };
        let mut out = junk.clone();
        encode(&header, &body, &mut out);
        prop_assert_eq!(&out[..junk.len()], &junk[..]);
        let enc = &out[junk.len()..];
        prop_assert_eq!(enc.len(), encoded_len(&header, &body));
        // The length known before the GSN is (a central log's reservation).
        let sized = SizeAtGsn::of(&RecordHeader { gsn: Gsn::new(gsn ^ txn), ..header }, &body);
        prop_assert_eq!(sized.at(header.gsn), enc.len());
        prop_assert_eq!(enc.len() % frame::ALIGN, 0);
        prop_assert_eq!(u32::from_le_bytes(enc[4..8].try_into().unwrap()) as usize, enc.len());
        // The scan's search after a bad record looks at the fixed part
        // before a checksum: it must not pass over a record.
        prop_assert!(Records::plausible(&enc[frame::head_len(LogPos::new(watermark))..]));
        // Trailing bytes after the record are not part of it.
        let mut more = enc.to_vec();
        more.extend_from_slice(&[0xff; 9]);
        for buf in [enc, &more[..]] {
            let got = decode(buf).unwrap();
            prop_assert_eq!(got.header, header);
            prop_assert_eq!(got.body, body);
            prop_assert_eq!(got.encoded_len(), enc.len());
        }
    }

    #[test]
    fn decode_and_scan_are_total_on_random_bytes(buf in bytes(600), base in any::<u64>()) {
        let _ = decode(&buf);
        let scan = scan_segment(&buf, LogPos::new(base));
        prop_assert!(scan.valid_len as usize <= buf.len());
    }
}

#[test]
fn bit_flip_followed_by_valid_records_is_corruption_at_its_offset() {
    let records = sample();
    // Watermark = offset: each record was appended once everything before
    // it was durable, so the damaged bytes had been synced.
    let (buf, offsets) = segment(&records);
    let last = *offsets.last().unwrap();
    // Every bit of every record but the last, including the length field:
    // a damaged length must not hide the records after it.
    for bit in 0..last * 8 {
        let mut b = buf.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        let victim = offsets.iter().rposition(|&o| o <= bit / 8).unwrap();
        let scan = scan_segment(&b, LogPos::ZERO);
        assert_prefix(&scan, &records, &offsets, victim);
        assert!(
            matches!(scan.end, ScanEnd::Corrupt { offset, .. } if offset as usize == offsets[victim]),
            "bit {bit}: {:?}",
            scan.end
        );
    }
}

/// Re-seal a record after editing it, to reach the checks behind the
/// checksum (a record not placed in a stream, as `decode` reads it).
fn reseal(rec: &mut [u8]) {
    reseal_at(rec, 0);
}

/// Re-seal the record `rec` (exactly one) placed at stream position
/// `position`.
fn reseal_at(rec: &mut [u8], position: u64) {
    let crc = crc32c::crc32c(&rec[4..]);
    rec[..4].copy_from_slice(&crc.to_le_bytes());
    frame::place_at(rec, LogPos::new(position));
}

#[test]
fn checksum_valid_but_unreadable_record_is_corruption_even_at_the_tail() {
    let records = sample();
    let (mut buf, offsets) = segment(&records);
    let last = *offsets.last().unwrap();
    // The kind: the payload's first byte, after the frame's head.
    buf[last + frame::head_len(LogPos::new(last as u64))] = 42;
    reseal_at(&mut buf[last..], last as u64);
    let scan = scan_segment(&buf, LogPos::ZERO);
    assert_eq!(scan.records.len(), records.len() - 1);
    assert!(matches!(&scan.end, ScanEnd::Corrupt { offset, detail }
        if *offset as usize == last && detail.contains("unknown record kind 42")));
}

/// A record built from raw parts, sealed at position 0: the frame's
/// prefix, `ints[0]` as its watermark, the fixed part (kind, flags,
/// page kind), then the rest of `ints` as vint64s, then `bytes`.
fn raw_record(kind: u8, flags: u8, page_kind: u8, ints: &[u64], bytes: &[u8]) -> Vec<u8> {
    let mut r = vec![0u8; frame::PREFIX];
    for (i, &v) in ints.iter().enumerate() {
        r.extend_from_slice(vint64::encode(v).as_ref());
        if i == 0 {
            r.extend_from_slice(&[kind, flags, page_kind, 0]);
        }
    }
    r.extend_from_slice(bytes);
    r.resize(r.len().next_multiple_of(frame::ALIGN), 0);
    let len = r.len() as u32;
    r[4..8].copy_from_slice(&len.to_le_bytes());
    reseal(&mut r);
    r
}

#[test]
fn decode_errors_name_the_problem() {
    let mut rec = Vec::new();
    let header = RecordHeader {
        page_kind: 0,
        tree: 3,
        gsn: Gsn::new(5),
        txn: 1,
        page: 9,
        prev_gsn: Gsn::new(4),
        compensation: false,
        smo_more: false,
        watermark: LogPos::new(4096),
    };
    let insert = RecordBody::Insert {
        key: b"k",
        value: b"v",
    };
    encode(&header, &insert, &mut rec);
    // Frame prefix 0..8, watermark 8..10; kind 10, flags 11, page kind
    // 12, reserved 13; GSN 14, slot 15, transaction start 16..18 (1 -
    // 4096, zigzagged: 8189), tree 18, page 19, GSN - prev GSN 20 (1,
    // zigzagged: 2); key length 21, value length 22, key 23, value 24;
    // padding to 32.
    assert_eq!(rec.len(), 32);
    assert_eq!(header_len(&header, RecordKind::Insert), 21);
    assert_eq!(
        rec,
        raw_record(1, 0, 0, &[4096, 5, 0, 8189, 3, 9, 2, 1, 1], b"kv"),
        "the layout of docs/FORMAT.md"
    );
    let edited = |f: &dyn Fn(&mut Vec<u8>), seal: bool| {
        let mut r = rec.clone();
        f(&mut r);
        if seal {
            reseal(&mut r);
        }
        decode(&r).err()
    };
    use DecodeError::{BadKind, Malformed};
    let framing = |e: FrameError| Some(DecodeError::Frame(e));
    assert_eq!(decode(&[]).err(), framing(FrameError::Truncated));
    assert_eq!(decode(&rec[..15]).err(), framing(FrameError::Truncated));
    assert_eq!(decode(&rec[..31]).err(), framing(FrameError::Truncated));
    assert_eq!(decode(&[0; 20]).err(), framing(FrameError::Zero));
    assert_eq!(decode(&[0; 100]).err(), framing(FrameError::Zero));
    let set_len = |n: u32| move |r: &mut Vec<u8>| r[4..8].copy_from_slice(&n.to_le_bytes());
    assert_eq!(edited(&set_len(8), false), framing(FrameError::BadLength));
    assert_eq!(edited(&set_len(20), false), framing(FrameError::BadLength));
    assert_eq!(
        edited(&set_len(16 << 20 | 8), false),
        framing(FrameError::BadLength)
    );
    assert_eq!(
        edited(&set_len(16 << 20), false),
        framing(FrameError::Truncated)
    );
    assert_eq!(
        edited(&|r| r[20] ^= 1, false),
        framing(FrameError::BadChecksum)
    );
    assert_eq!(edited(&|r| r[10] = 0, true), Some(BadKind(0)));
    assert_eq!(edited(&|r| r[10] = 10, true), Some(BadKind(10)));
    assert!(matches!(edited(&|r| r[11] = 2, true), Some(Malformed(_))));
    assert!(matches!(edited(&|r| r[11] = 4, true), Some(Malformed(_))));
    assert!(matches!(edited(&|r| r[13] = 1, true), Some(Malformed(_))));
    // A page kind on a record that is not an image.
    assert!(matches!(edited(&|r| r[12] = 2, true), Some(Malformed(_))));
    // Any tree is fine on a page record (one byte holds 0..=127).
    assert_eq!(edited(&|r| r[18] = 0xff, true), None, "tree 127 decodes");
    // An integer in a longer form than it needs: 2 bytes for 0.
    // The GSN 5 as two bytes (5 << 2 | 0b10, 0).
    let mut long = rec[..25].to_vec();
    long.splice(14..15, [22, 0]);
    long.resize(32, 0);
    reseal(&mut long);
    assert_eq!(
        decode(&long).err(),
        Some(Malformed("integer not in its shortest form"))
    );
    // A commit record (kind 5) with this payload does not parse.
    assert!(matches!(edited(&|r| r[10] = 5, true), Some(Malformed(_))));
    // The shortest record: an end record of one-byte integers.
    let mut end = Vec::new();
    encode(&RecordHeader::default(), &RecordBody::End, &mut end);
    assert_eq!(end.len(), frame::MIN_LEN);
    assert!(decode(&end).is_ok());
    // Header fields out of their range: a slot above 2^16, a transaction
    // start outside 0..2^48, a tree above 2^32.
    for (ints, what) in [
        (&[0, 1, 1 << 16, 0][..], "transaction slot above 2^16"),
        (
            &[0, 1, 0, 1],
            "transaction start outside the stream position range",
        ),
        (&[0, 1, 0, 0, 1 << 32, 1, 0], "tree root above 2^32"),
    ] {
        let kind = if ints.len() == 4 { 6 } else { 7 };
        assert_eq!(
            decode(&raw_record(kind, 0, 0, ints, b"")).err(),
            Some(Malformed(what))
        );
    }
    // Key length past the record's end; nonzero padding; payload shorter
    // than the record.
    assert!(matches!(edited(&|r| r[21] = 201, true), Some(Malformed(_))));
    assert_eq!(
        edited(&|r| r[31] = 1, true),
        Some(Malformed("padding is not zero"))
    );
    let grown = |r: &mut Vec<u8>| {
        r.resize(40, 0);
        r[4..8].copy_from_slice(&40u32.to_le_bytes());
    };
    assert_eq!(
        edited(&grown, true),
        Some(Malformed("record longer than its payload"))
    );
    // Update span counts outside 1..=4.
    let head = [0, 1, 0, 0, 1, 1, 2];
    for n in [0, 5] {
        let ints: Vec<u64> = head.iter().copied().chain([1, n]).collect();
        assert_eq!(
            decode(&raw_record(2, 0, 0, &ints, b"k")).err(),
            Some(Malformed("update span count not in 1..=4"))
        );
    }
    // A commit claiming more dependencies than it has bytes.
    assert_eq!(
        decode(&raw_record(5, 0, 0, &[0, 1, 0, 0, 7, 1000], b"")).err(),
        Some(Malformed("more dependencies than bytes"))
    );
    // An image whose body claims more than a page, and an image without
    // a page kind.
    let mut img = Vec::new();
    let body = RecordBody::Image(PageImage {
        head: b"x",
        zero_run: 10,
        tail: b"",
    });
    let image_header = RecordHeader {
        page_kind: 2,
        ..header
    };
    encode(&image_header, &body, &mut img);
    assert_eq!(decode(&img).map(|r| r.header), Ok(image_header));
    let ints: Vec<u64> = head
        .iter()
        .copied()
        .chain([MAX_IMAGE_BODY as u64 + 1, 1, 10])
        .collect();
    assert_eq!(
        decode(&raw_record(4, 0, 2, &ints, b"x")).err(),
        Some(Malformed("page image larger than a page"))
    );
    img[12] = 0;
    reseal(&mut img);
    assert_eq!(
        decode(&img).err(),
        Some(Malformed("page image without a page kind"))
    );
    // A frame whose watermark leaves no room for the fixed part.
    let mut short = vec![0u8; frame::PREFIX];
    short.extend_from_slice(vint64::encode(1 << 28).as_ref());
    short.resize(frame::MIN_LEN, 0);
    short[4..8].copy_from_slice(&(frame::MIN_LEN as u32).to_le_bytes());
    reseal(&mut short);
    assert_eq!(
        decode(&short).err(),
        Some(Malformed("payload shorter than its fixed part"))
    );
}

#[test]
fn encode_refuses_headers_it_could_not_read_back() {
    let insert = RecordBody::Insert {
        key: b"k",
        value: b"v",
    };
    let image = RecordBody::Image(PageImage {
        head: b"x",
        zero_run: 0,
        tail: b"",
    });
    let cases = [
        (RecordHeader::default(), image),
        (
            RecordHeader {
                page_kind: 2,
                ..Default::default()
            },
            insert,
        ),
        (
            RecordHeader {
                tree: 1,
                ..Default::default()
            },
            RecordBody::End,
        ),
        (
            RecordHeader {
                page: 1,
                ..Default::default()
            },
            RecordBody::End,
        ),
    ];
    for (header, body) in cases {
        let r = std::panic::catch_unwind(|| encode(&header, &body, &mut Vec::new()));
        assert!(r.is_err(), "{header:?} {body:?}");
    }
}
