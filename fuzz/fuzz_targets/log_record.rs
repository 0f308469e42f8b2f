//! `wal::record::decode` on arbitrary bytes: never panics, never allocates
//! beyond its input (decode borrows; nothing here copies more than the
//! input), and whatever decodes re-encodes to the same bytes. The input is
//! decoded as given and again with its checksum rewritten, so the checks
//! behind the CRC are reached. Then, from the same bytes via `arbitrary`:
//! encode -> decode gives back the record, and an update diff applies and
//! undoes exactly.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use waypoint::logstore::frame::{FrameError, MIN_LEN};
use waypoint::wal::record::{decode, encode_update, DecodeError};
use waypoint_fuzz::{assert_reencodes, fix_record_checksums, ArbRecord};

fn check_decode(bytes: &[u8]) {
    match decode(bytes) {
        Ok(rec) => {
            assert_reencodes(bytes, &rec, 0);
            // Every accessor of the decoded body stays in bounds.
            if let waypoint::wal::record::RecordBody::Commit { deps, .. } = rec.body {
                assert_eq!(deps.iter().count(), deps.len());
            }
            if let waypoint::wal::record::RecordBody::Image(img) = rec.body {
                let _ = img.image_body(img.body_len() + 32);
            }
        }
        Err(DecodeError::Frame(FrameError::Zero)) => {
            assert!(bytes[..bytes.len().min(MIN_LEN)].iter().all(|&b| b == 0))
        }
        Err(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    check_decode(data);
    let mut sealed = data.to_vec();
    if fix_record_checksums(&mut sealed[..], 0) > 0 {
        check_decode(&sealed);
    }

    let mut u = Unstructured::new(data);
    if let Ok(mut rec) = ArbRecord::arbitrary(&mut u) {
        rec.normalise();
        let mut buf = Vec::new();
        rec.encode(&mut buf);
        assert_eq!(buf.len(), rec.record().encoded_len());
        let decoded = decode(&buf).expect("an encoded record decodes");
        assert_eq!(decoded, rec.record(), "decode(encode(x)) != x");
    }
    if let (Ok(old), Ok(new)) = (<&[u8]>::arbitrary(&mut u), <&[u8]>::arbitrary(&mut u)) {
        let diff = encode_update(old, new);
        assert_eq!(diff.apply_update(old).as_deref(), Some(new));
        assert_eq!(diff.undo_update(new).as_deref(), Some(old));
    }
});
