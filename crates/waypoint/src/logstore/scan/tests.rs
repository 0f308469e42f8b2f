//! The tail rule on test records (`logstore::test_support`): every frame
//! reads the same whatever the scheme's payload, so these hold for every
//! scheme's segments; `wal::record`'s tests check the WAL's records on it.

use super::*;
use crate::logstore::test_support::{frame, frames, numbered, segment_with, TestRecords, MARK};
use proptest::prelude::*;

fn scan_test(buf: &[u8], base: u64) -> Scan<crate::logstore::test_support::Numbered<'_>> {
    scan::<TestRecords>(buf, LogPos::new(base))
}

/// A scan of frames at `offsets` with one damaged record `victim`: the
/// records before it in place with their watermarks, the valid length
/// and the end at the victim, as corruption or as the torn tail.
fn ends_at_victim(
    scan: &Scan<crate::logstore::test_support::Numbered<'_>>,
    offsets: &[usize],
    base: u64,
    victim: usize,
    corrupt: bool,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(scan.records.len(), victim);
    for (j, (off, rec)) in scan.records.iter().enumerate() {
        prop_assert_eq!(*off as usize, offsets[j]);
        prop_assert_eq!(rec.watermark, base + offsets[j] as u64);
    }
    prop_assert_eq!(scan.valid_len as usize, offsets[victim]);
    let at = offsets[victim] as u64;
    if corrupt {
        prop_assert!(matches!(scan.end, ScanEnd::Corrupt { offset, .. } if offset == at), "{:?}", scan.end);
    } else {
        prop_assert!(matches!(scan.end, ScanEnd::TornTail { offset, .. } if offset == at), "{:?}", scan.end);
    }
    Ok(())
}

/// Test payloads of many lengths: record `i` is number `i + 1`.
fn sample() -> Vec<Vec<u8>> {
    [3, 100, 56, 2000, 0, 0, 5, 7, 20]
        .iter()
        .enumerate()
        .map(|(i, &fill)| numbered(i as u64 + 1, fill))
        .collect()
}

/// A segment at stream position 0, each record with watermark = its own
/// offset (everything before it was durable when it was appended).
fn segment(payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
    frames(payloads, 0)
}

/// The scan returned exactly the first `n` records, as [`segment`] made
/// them (watermark = offset), at their offsets.
fn assert_prefix(
    scan: &Scan<crate::logstore::test_support::Numbered<'_>>,
    offsets: &[usize],
    n: usize,
) {
    assert_eq!(scan.records.len(), n, "records returned");
    for (i, (off, rec)) in scan.records.iter().enumerate() {
        assert_eq!(*off as usize, offsets[i]);
        assert_eq!((rec.n, rec.watermark), (i as u64 + 1, offsets[i] as u64));
    }
}

/// Re-seal the frame `rec` after editing it, placed at `position`, to reach
/// the checks behind the checksum.
fn reseal_at(rec: &mut [u8], position: u64) {
    let crc = crc32c::crc32c(&rec[4..]);
    rec[..4].copy_from_slice(&crc.to_le_bytes());
    crate::logstore::frame::place_at(rec, LogPos::new(position));
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    (any::<u64>(), 0usize..300).prop_map(|(n, fill)| numbered(n, fill))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn scan_is_total_on_random_bytes(buf in prop::collection::vec(any::<u8>(), 0..600), base in any::<u64>()) {
        let scan = scan_test(&buf, base);
        prop_assert!(scan.valid_len as usize <= buf.len());
    }

    #[test]
    fn scan_is_total_on_damaged_segments(
        payloads in prop::collection::vec(payload(), 1..8),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..4),
        cut in any::<prop::sample::Index>(),
        splat in any::<prop::sample::Index>(),
        splat_byte in any::<u8>(),
        base in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let (mut buf, offsets) = frames(&payloads, base);
        let first = flips.iter().map(|(at, _)| at.index(buf.len())).min();
        for (at, bit) in &flips {
            let i = at.index(buf.len());
            buf[i] ^= 1 << bit;
        }
        // A random overwrite of a 4-byte field somewhere.
        let s = splat.index(buf.len());
        let mut damaged = buf.clone();
        for b in damaged.iter_mut().skip(s).take(4) {
            *b = splat_byte;
        }
        for b in [&buf, &damaged] {
            let cut = cut.index(b.len() + 1);
            let scan = scan_test(&b[..cut], base);
            prop_assert!(scan.valid_len as usize <= cut);
            let _ = scan_test(b, base);
        }
        // Records wholly before the first flipped byte come back intact.
        if let Some(first) = first {
            let scan = scan_test(&buf, base);
            let intact = offsets
                .iter()
                .zip(offsets.iter().skip(1).chain([&buf.len()]))
                .take_while(|(_, &end)| end <= first)
                .count();
            prop_assert!(scan.records.len() >= intact);
            for (i, (_, rec)) in scan.records.iter().take(intact).enumerate() {
                prop_assert_eq!(numbered(rec.n, rec.fill.len()), payloads[i].clone());
            }
        }
    }

    /// One bit flip in record i of a segment where every record was
    /// appended after all before it were durable: corruption at record i
    /// unless it is the last record, which makes it a torn tail. CRC32C
    /// catches every single-bit error, so this oracle is exact.
    #[test]
    fn single_bit_flip_is_corrupt_mid_segment_and_torn_at_the_tail(
        payloads in prop::collection::vec(payload(), 1..8),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
        base in 0u64..1 << 40,
    ) {
        let (mut buf, offsets) = frames(&payloads, base);
        let i = at.index(buf.len());
        buf[i] ^= 1 << bit;
        let victim = offsets.iter().rposition(|&o| o <= i).unwrap();
        let scan = scan_test(&buf, base);
        for (j, (_, rec)) in scan.records.iter().enumerate() {
            prop_assert_eq!(numbered(rec.n, rec.fill.len()), payloads[j].clone());
        }
        ends_at_victim(&scan, &offsets, base, victim, victim + 1 != payloads.len())?;
    }

    /// One bit flip in record v, with the records after it appended at
    /// random durable positions: corruption exactly when one of them
    /// has a watermark past v's stream position (v was durable before
    /// it was appended); otherwise a torn tail at v, and nothing after
    /// v is returned.
    #[test]
    fn bit_flip_is_corrupt_only_if_a_later_watermark_passes_it(
        payloads in prop::collection::vec(payload(), 2..8),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
        base in 0u64..1 << 40,
        // Per later record: whether its watermark is past the victim,
        // and how far before/after the victim's position it is.
        later in prop::collection::vec((any::<bool>(), 0u64..64), 8),
    ) {
        // Built with the watermarks the records up to the victim keep
        // below, so they have the same lengths and offsets there.
        let (plain, offsets) = frames(&payloads, base);
        let i = at.index(plain.len());
        let v = offsets.iter().rposition(|&o| o <= i).unwrap();
        let bad_at = base + offsets[v] as u64;
        let (mut buf, _) = segment_with(&payloads, base, |j, off| {
            if j <= v {
                base + off as u64
            } else if later[j].0 {
                // Past the victim, at most the record's own position.
                bad_at + 1 + later[j].1.min((off - offsets[v] - 1) as u64)
            } else {
                bad_at.saturating_sub(later[j].1 * 8)
            }
        });
        buf[i] ^= 1 << bit;
        let scan = scan_test(&buf, base);
        let corrupt = (v + 1..payloads.len()).any(|j| later[j].0);
        ends_at_victim(&scan, &offsets, base, v, corrupt)?;
    }

    /// A recycled segment file: this life's records over the start of
    /// the previous life's, which were placed at lower stream positions
    /// and carry that life's watermarks. The scan returns exactly this
    /// life's records and ends where they end, never as corruption.
    #[test]
    fn a_recycled_files_older_records_end_the_scan_and_are_not_read(
        old in prop::collection::vec(payload(), 1..12),
        new in prop::collection::vec(payload(), 0..6),
        old_base in 0u64..1 << 40,
        gap in 0u64..1 << 30,
    ) {
        let (old_bytes, _) = frames(&old, old_base);
        let new_base = old_base + old_bytes.len() as u64 + gap;
        let (new_bytes, offsets) = frames(&new, new_base);
        let mut file = old_bytes.clone();
        file.resize(file.len().max(new_bytes.len()), 0);
        file[..new_bytes.len()].copy_from_slice(&new_bytes);
        let scan = scan_test(&file, new_base);
        prop_assert_eq!(scan.records.len(), new.len());
        for (j, (off, rec)) in scan.records.iter().enumerate() {
            prop_assert_eq!(*off as usize, offsets[j]);
            prop_assert_eq!(numbered(rec.n, rec.fill.len()), new[j].clone());
        }
        prop_assert_eq!(scan.valid_len as usize, new_bytes.len());
        // Clean when nothing, or only zeros, of the old life follow.
        let end_ok = match scan.end {
            ScanEnd::Clean => true,
            ScanEnd::TornTail { offset, .. } => offset as usize == new_bytes.len(),
            ScanEnd::Corrupt { .. } => false,
        };
        prop_assert!(end_ok, "{:?}", scan.end);
    }
}

#[test]
fn truncating_the_last_record_anywhere_is_a_torn_tail() {
    let (buf, offsets) = segment(&sample());
    let n = offsets.len();
    let last = offsets[n - 1];
    for cut in last..=buf.len() {
        // Truncated file, and a preallocated file whose tail never landed.
        let mut zeroed = buf.clone();
        zeroed[cut..].fill(0);
        zeroed.resize(buf.len() + 64, 0);
        // Zeroing only padding (already zero) leaves the record whole.
        let whole = zeroed[..buf.len()] == buf[..];
        for (b, whole) in [(&buf[..cut], cut == buf.len()), (&zeroed[..], whole)] {
            let scan = scan_test(b, 0);
            if whole {
                assert_prefix(&scan, &offsets, n);
                assert_eq!(scan.end, ScanEnd::Clean);
                continue;
            }
            assert_prefix(&scan, &offsets, n - 1);
            assert_eq!(scan.valid_len as usize, last);
            match scan.end {
                ScanEnd::Clean => assert_eq!(cut, last, "clean only at a record boundary"),
                ScanEnd::TornTail { offset, .. } => assert_eq!(offset as usize, last),
                ScanEnd::Corrupt { .. } => panic!("cut at {cut}: {:?}", scan.end),
            }
        }
    }
}

#[test]
fn bit_flip_in_the_last_record_is_a_torn_tail() {
    let (buf, offsets) = segment(&sample());
    let n = offsets.len();
    let last = offsets[n - 1];
    for bit in last * 8..buf.len() * 8 {
        let mut b = buf.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        let scan = scan_test(&b, 0);
        assert_prefix(&scan, &offsets, n - 1);
        assert!(
            matches!(scan.end, ScanEnd::TornTail { offset, .. } if offset as usize == last),
            "bit {bit}: {:?}",
            scan.end
        );
    }
}

#[test]
fn bit_flip_followed_by_valid_records_is_corruption_at_its_offset() {
    // Watermark = offset: each record was appended once everything before
    // it was durable, so the damaged bytes had been synced.
    let (buf, offsets) = segment(&sample());
    let last = *offsets.last().unwrap();
    // Every bit of every record but the last, including the length field:
    // a damaged length must not hide the records after it.
    for bit in 0..last * 8 {
        let mut b = buf.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        let victim = offsets.iter().rposition(|&o| o <= bit / 8).unwrap();
        let scan = scan_test(&b, 0);
        assert_prefix(&scan, &offsets, victim);
        assert!(
            matches!(scan.end, ScanEnd::Corrupt { offset, .. } if offset as usize == offsets[victim]),
            "bit {bit}: {:?}",
            scan.end
        );
    }
}

#[test]
fn bit_flip_followed_only_by_unsynced_records_is_a_torn_tail() {
    let payloads = sample();
    let (_, offsets) = segment(&payloads);
    for v in 0..payloads.len() - 1 {
        let o = offsets[v];
        // The records after v were appended while the log was durable up
        // to v's start at most (the first exactly there): a crash kept
        // their writes and lost (part of) v's.
        let (buf, _) = segment_with(&payloads, 0, |i, off| match i {
            i if i <= v => off as u64,
            i if i == v + 1 => o as u64,
            i => (o / i) as u64,
        });
        for bit in o * 8..offsets[v + 1] * 8 {
            let mut b = buf.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            let scan = scan_test(&b, 0);
            assert_prefix(&scan, &offsets, v);
            assert_eq!(scan.valid_len as usize, o);
            assert!(
                matches!(scan.end, ScanEnd::TornTail { offset, .. } if offset as usize == o),
                "record {v}, bit {bit}: {:?}",
                scan.end
            );
        }
        // One later record appended after v was durable is enough to
        // prove the damage, wherever it is.
        let last = payloads.len() - 1;
        // (Watermarks are part of the frame, so the offsets after v move.)
        let (mut buf, moved) = segment_with(&payloads, 0, |i, off| match i {
            i if i <= v => off as u64,
            i if i == last => o as u64 + 8,
            _ => o as u64,
        });
        buf[o + 14] ^= 4;
        let scan = scan_test(&buf, 0);
        assert_prefix(&scan, &offsets, v);
        assert!(
            matches!(&scan.end, ScanEnd::Corrupt { offset, detail }
                if *offset as usize == o && detail.contains(&format!("offset {}", moved[last]))),
            "record {v}: {:?}",
            scan.end
        );
    }
}

#[test]
fn hole_followed_by_unsynced_records_is_a_torn_tail() {
    // A crash kept the writes of records 3.. but not the one of 2 (the
    // segment is preallocated, so the hole reads as zeros).
    let payloads = sample();
    let (_, offsets) = segment(&payloads);
    let (mut buf, _) = segment_with(&payloads, 0, |_, off| off.min(offsets[2]) as u64);
    buf[offsets[2]..offsets[3]].fill(0);
    let scan = scan_test(&buf, 0);
    assert_prefix(&scan, &offsets, 2);
    assert_eq!(scan.valid_len as usize, offsets[2]);
    assert!(
        matches!(scan.end, ScanEnd::TornTail { offset, error: FrameError::Zero } if offset as usize == offsets[2]),
        "{:?}",
        scan.end
    );
    // A hole that swallowed only the first part of the record: the rest
    // is garbage, not zeros.
    let (mut buf, _) = segment_with(&payloads, 0, |_, off| off.min(offsets[2]) as u64);
    buf[offsets[2]..offsets[2] + 64].fill(0);
    let scan = scan_test(&buf, 0);
    assert_prefix(&scan, &offsets, 2);
    assert!(
        matches!(scan.end, ScanEnd::TornTail { offset, .. } if offset as usize == offsets[2]),
        "{:?}",
        scan.end
    );
}

#[test]
fn watermarks_are_compared_with_the_stream_position_of_the_bad_record() {
    let payloads = sample();
    let base = 3 << 20;
    let damaged = |at: u64| {
        let (mut buf, offsets) = segment_with(&payloads, at, |_, off| base + off as u64);
        buf[offsets[1] + 30] ^= 1;
        (buf, offsets)
    };
    let (buf, offsets) = damaged(base);
    let scan = scan_test(&buf, base);
    assert_eq!(scan.records.len(), 1);
    assert!(
        matches!(scan.end, ScanEnd::Corrupt { offset, .. } if offset as usize == offsets[1]),
        "{:?}",
        scan.end
    );
    // The same bytes read as a segment further along the stream: the
    // later records' watermarks no longer reach the bad record.
    let (buf, _) = damaged(base + 4096);
    let scan = scan_test(&buf, base + 4096);
    assert_eq!(scan.records.len(), 1);
    assert_eq!(scan.records[0].0, 0, "offsets stay segment-relative");
    assert!(
        matches!(scan.end, ScanEnd::TornTail { offset, .. } if offset as usize == offsets[1]),
        "{:?}",
        scan.end
    );
    // A base near the end of the stream space does not overflow.
    let (buf, _) = damaged(u64::MAX - 8);
    let scan = scan_test(&buf, u64::MAX - 8);
    assert!(matches!(scan.end, ScanEnd::TornTail { .. }));
}

#[test]
fn unsynced_record_embedding_a_valid_record_is_stepped_over() {
    // Record 3 (unsynced, landed out of order) carries as its filler a
    // whole record with a high watermark; the search must not take the
    // embedded bytes for a record of the log.
    let embedded = frame(u64::MAX, &numbered(0, 0));
    let mut payloads = sample();
    // Records 2 on were never synced: their watermarks stay below.
    let synced = segment(&payloads).1[2];
    // A filler prefix that puts the embedded record on an aligned offset.
    let (mut buf, offsets, at) = (0..8)
        .find_map(|pad| {
            let mut p = vec![MARK, 0x09]; // record number 4
            let fill = pad + embedded.len();
            crate::logstore::frame::put_vint(&mut p, fill as u64);
            p.resize(p.len() + pad, 1);
            p.extend_from_slice(&embedded);
            payloads[3] = p;
            let (buf, offsets) = segment_with(&payloads, 0, |_, off| off.min(synced) as u64);
            let rec3 = &buf[offsets[3]..offsets[4]];
            let at = offsets[3]
                + rec3
                    .windows(embedded.len())
                    .position(|w| w[4..] == embedded[4..])?;
            at.is_multiple_of(crate::logstore::frame::ALIGN)
                .then_some((buf, offsets, at))
        })
        .expect("some filler aligns the embedded record");
    // Placed at the position where it lies, so that only stepping over
    // record 3 keeps it out of the log.
    crate::logstore::frame::place_at(&mut buf[at..at + embedded.len()], LogPos::new(at as u64));
    reseal_at(&mut buf[offsets[3]..offsets[4]], offsets[3] as u64);
    assert!(
        (offsets[3]..offsets[4]).step_by(8).any(|at| {
            crate::logstore::frame::open(&buf[at..], LogPos::new(at as u64))
                .is_ok_and(|f| f.watermark == LogPos::MAX)
        }),
        "the embedded record is aligned"
    );
    buf[offsets[2] + 20] ^= 1;
    let scan = scan_test(&buf, 0);
    assert_prefix(&scan, &offsets, 2);
    assert!(
        matches!(scan.end, ScanEnd::TornTail { offset, .. } if offset as usize == offsets[2]),
        "{:?}",
        scan.end
    );
}

#[test]
fn damaged_length_field_does_not_hide_later_records() {
    let (buf, offsets) = segment(&sample());
    let victim = offsets[2];
    // Lengths that swallow the rest, overrun the buffer, are too short or
    // land inside the next record.
    for len in [
        buf.len() - victim,
        1 << 20,
        48,
        56,
        64,
        (offsets[3] - victim) + 8,
        0,
        52,
    ] {
        let mut b = buf.clone();
        b[victim + 4..victim + 8].copy_from_slice(&(len as u32).to_le_bytes());
        let scan = scan_test(&b, 0);
        assert_prefix(&scan, &offsets, 2);
        assert!(
            matches!(scan.end, ScanEnd::Corrupt { offset, .. } if offset as usize == victim),
            "len {len}: {:?}",
            scan.end
        );
    }
}

#[test]
fn zeroed_record_in_the_middle_is_corruption() {
    let (mut buf, offsets) = segment(&sample());
    buf[offsets[1]..offsets[2]].fill(0);
    let scan = scan_test(&buf, 0);
    assert_prefix(&scan, &offsets, 1);
    assert!(matches!(scan.end, ScanEnd::Corrupt { offset, .. } if offset as usize == offsets[1]));
}

#[test]
fn zero_filled_tail_is_clean() {
    let (mut buf, offsets) = segment(&sample());
    let n = offsets.len();
    let len = buf.len();
    buf.resize(len + 8192, 0);
    let scan = scan_test(&buf, 0);
    assert_prefix(&scan, &offsets, n);
    assert_eq!(scan.end, ScanEnd::Clean);
    assert_eq!(scan.valid_len as usize, len);
    // A zero tail shorter than a frame, and an empty segment.
    let scan = scan_test(&buf[..len + 5], 0);
    assert_eq!((scan.records.len(), scan.end), (n, ScanEnd::Clean));
    assert_eq!(scan_test(&[], 0).end, ScanEnd::Clean);
    assert_eq!(scan_test(&[0; 4096], 0).end, ScanEnd::Clean);
    // Zeros then garbage that is not a record: the log ends at the zeros.
    buf[len + 4000] = 1;
    let scan = scan_test(&buf, 0);
    assert_eq!(scan.records.len(), n);
    assert!(
        matches!(scan.end, ScanEnd::TornTail { offset, error: FrameError::Zero } if offset as usize == len)
    );
}

#[test]
fn checksum_valid_but_unreadable_record_is_corruption_even_at_the_tail() {
    let (mut buf, offsets) = segment(&sample());
    let last = *offsets.last().unwrap();
    // The payload's first byte, after the prefix and a two-byte watermark.
    buf[last + 10] = 42;
    reseal_at(&mut buf[last..], last as u64);
    let scan = scan_test(&buf, 0);
    assert_eq!(scan.records.len(), offsets.len() - 1);
    assert!(matches!(&scan.end, ScanEnd::Corrupt { offset, detail }
        if *offset as usize == last && detail.contains("not a test record")));
    // A watermark that does not read is the frame's own such damage.
    buf[last + 8] = 0; // a nine-byte watermark overrunning the frame...
    buf[last + 4..last + 8].copy_from_slice(&16u32.to_le_bytes());
    reseal_at(&mut buf[last..last + 16], last as u64);
    let scan = scan_test(&buf[..last + 16], 0);
    assert!(matches!(&scan.end, ScanEnd::Corrupt { offset, detail }
        if *offset as usize == last && detail.contains("payload longer than the record")));
}

#[test]
fn corruption_becomes_an_error_naming_file_and_offset() {
    let (mut buf, offsets) = segment(&sample());
    buf[offsets[2] + 20] ^= 0x10;
    let scan = scan_test(&buf, 0);
    let err = scan.end.to_error("/db/wal/p3/00000007.log", 4096).unwrap();
    match &err {
        Error::Corruption { path, offset, .. } => {
            assert_eq!(path, std::path::Path::new("/db/wal/p3/00000007.log"));
            assert_eq!(*offset, 4096 + offsets[2] as u64);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("record checksum mismatch"));
    assert_eq!(ScanEnd::Clean.to_error("x", 0).map(|e| e.to_string()), None);
}
