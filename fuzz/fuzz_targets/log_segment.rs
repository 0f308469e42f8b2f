//! `wal::record::scan_segment` and `logstore::segment::decode_header` on
//! arbitrary bytes: never panic, never hang (the scan is linear: each step
//! moves forward by at least 8 bytes), allocate only the record list; and
//! what they return is consistent:
//! - the records lie back to back from offset 0 up to `valid_len`;
//! - a torn tail or corruption is reported at `valid_len`, a clean end
//!   means the rest of the buffer is empty or zero;
//! - a header that decodes as valid is exactly the header `encode_header`
//!   writes for its stream and start.
//!
//! The first 8 bytes are the scan's base stream position (so watermark
//! comparisons see both small and huge bases). The rest is scanned as
//! given, again with each framed record's checksum rewritten, and as a
//! whole segment file (header, then records). Finally a list of records
//! built with `arbitrary` is encoded back to back and must scan cleanly
//! to exactly those records.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use waypoint::logstore::scan::ScanEnd;
use waypoint::logstore::segment::{
    decode_header, encode_header, header_checksum, Header, HEADER_SIZE,
};
use waypoint::wal::record::scan_segment;
use waypoint::{LogPos, SchemeKind};
use waypoint_fuzz::{assert_reencodes, fix_record_checksums, ArbRecord};

const PATH: &str = "/db/wal/p00001/00000000000000000000.wal";

fn check_scan(buf: &[u8], base: u64) {
    let scan = scan_segment(buf, LogPos::new(base));
    let mut next = 0u64;
    for (offset, rec) in &scan.records {
        assert_eq!(*offset, next, "records are not back to back");
        assert_reencodes(&buf[*offset as usize..], rec, base.wrapping_add(*offset));
        next += rec.encoded_len() as u64;
    }
    assert_eq!(
        next, scan.valid_len,
        "valid_len is not the end of the records"
    );
    assert!(scan.valid_len <= buf.len() as u64);
    let rest = &buf[scan.valid_len as usize..];
    match &scan.end {
        ScanEnd::Clean => assert!(rest.iter().all(|&b| b == 0), "clean end before data"),
        ScanEnd::TornTail { offset, .. } => {
            assert_eq!(*offset, scan.valid_len);
            assert!(!rest.is_empty());
        }
        ScanEnd::Corrupt { offset, .. } => {
            assert_eq!(*offset, scan.valid_len);
            assert!(!rest.is_empty());
            let err = scan
                .end
                .to_error(PATH, HEADER_SIZE)
                .expect("corruption error");
            let _ = err.to_string();
        }
    }
    if !matches!(scan.end, ScanEnd::Corrupt { .. }) {
        assert!(scan.end.to_error(PATH, HEADER_SIZE).is_none());
    }
}

fn check_segment_file(file: &[u8]) {
    match decode_header(Path::new(PATH), file, SchemeKind::PerWorker) {
        Ok(Header::Valid { stream, start }) => {
            assert_eq!(
                encode_header(SchemeKind::PerWorker, stream, start)[..],
                file[..HEADER_SIZE as usize],
                "a valid header is not canonical"
            );
            check_scan(&file[HEADER_SIZE as usize..], start.get());
        }
        Ok(Header::Torn) => {}
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (base, rest) = match data.split_first_chunk::<8>() {
        Some((b, rest)) => (u64::from_le_bytes(*b), rest),
        None => (0, data),
    };
    check_scan(rest, base);
    let mut sealed = rest.to_vec();
    if fix_record_checksums(&mut sealed, base) > 0 {
        check_scan(&sealed, base);
    }

    // The whole input as a segment file, and with its header's checksum
    // fixed (so magic, version, stream and start are checked), and with
    // its records sealed too.
    check_segment_file(data);
    if data.len() >= HEADER_SIZE as usize {
        let mut file = data.to_vec();
        // The per-worker scheme's tag and zeros, under a valid checksum.
        let ours = encode_header(SchemeKind::PerWorker, 0, LogPos::ZERO);
        file[28..32].copy_from_slice(&ours[28..32]);
        let crc = header_checksum(&file[..HEADER_SIZE as usize]);
        file[24..28].copy_from_slice(&crc.to_le_bytes());
        check_segment_file(&file);
        let start = u64::from_le_bytes(file[16..24].try_into().unwrap());
        if fix_record_checksums(&mut file[HEADER_SIZE as usize..], start) > 0 {
            check_segment_file(&file);
        }
    }

    // Round trip: records encoded back to back scan back to themselves.
    let mut u = Unstructured::new(data);
    if let Ok(mut recs) = Vec::<ArbRecord>::arbitrary(&mut u) {
        let mut buf = Vec::new();
        for r in &mut recs {
            r.normalise();
            r.encode(&mut buf);
        }
        waypoint::logstore::frame::place_at(&mut buf, LogPos::new(base));
        let scan = scan_segment(&buf, LogPos::new(base));
        assert_eq!(
            scan.end,
            ScanEnd::Clean,
            "encoded records do not scan clean"
        );
        assert_eq!(scan.valid_len, buf.len() as u64);
        assert_eq!(scan.records.len(), recs.len());
        for ((_, got), want) in scan.records.iter().zip(&recs) {
            assert_eq!(*got, want.record(), "scan(encode(xs)) != xs");
        }
    }
});
