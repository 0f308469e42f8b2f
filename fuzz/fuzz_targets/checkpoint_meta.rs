//! `checkpoint::meta::decode` (the log floor in `checkpoint.waypoint`) on
//! arbitrary bytes: never panics, and
//! - on the input as given and with its checksum rewritten (so the magic,
//!   padding and version checks behind the CRC are reached), an `Ok` floor
//!   re-encodes to exactly the input, and every error is `Corruption` at an
//!   offset inside the 32-byte file naming the given path, or
//!   `UnsupportedFormatVersion` (only possible behind a valid checksum);
//! - with the checksum fixed, decoding succeeds exactly when magic, version
//!   and padding are right;
//! - `meta::read` of the input as a file on a simulated disk (any length)
//!   agrees with `decode`;
//! - for a floor taken from the input, `decode(encode(x)) == x`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use waypoint::checkpoint::meta::{self, LEN, META_FILE};
use waypoint::io::{OpenMode, SimStorage, Storage};
use waypoint::Error;

fn check(bytes: &[u8]) -> Option<u64> {
    let path = Path::new("/db").join(META_FILE);
    match meta::decode(&path, bytes) {
        Ok(floor) => {
            assert_eq!(
                &meta::encode(floor)[..],
                bytes,
                "a decoded floor re-encodes to its input"
            );
            Some(floor)
        }
        Err(Error::Corruption {
            path: p, offset, ..
        }) => {
            assert_eq!(p, path);
            assert!(offset < LEN as u64, "offset {offset} outside the file");
            None
        }
        Err(Error::UnsupportedFormatVersion {
            found, supported, ..
        }) => {
            assert_ne!(found, supported);
            assert_eq!(bytes.len(), LEN);
            None
        }
        Err(e) => panic!("unexpected error kind: {e:?}"),
    }
}

/// Magic, version and padding as the format wants them.
fn well_formed(b: &[u8]) -> bool {
    &b[0..8] == b"WPCHKPT\0"
        && b[8..12] == 1u32.to_le_bytes()
        && b[12..16] == [0; 4]
        && b[28..32] == [0; 4]
}

fn seal(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() == LEN {
        let mut sealed = data.to_vec();
        seal(&mut sealed);
        assert_eq!(check(&sealed).is_some(), well_formed(&sealed), "{sealed:?}");
    }
    // Byte 0 picks which fields of the rest (padded to 32 bytes) are made
    // right, so every check is reached from an empty corpus: bit 0 magic,
    // 1 version, 2 and 3 the two paddings, 4 the checksum (last).
    if let Some((&mask, rest)) = data.split_first() {
        let mut b = rest.to_vec();
        b.resize(LEN, 0);
        if mask & 1 != 0 {
            b[0..8].copy_from_slice(b"WPCHKPT\0");
        }
        if mask & 2 != 0 {
            b[8..12].copy_from_slice(&1u32.to_le_bytes());
        }
        if mask & 4 != 0 {
            b[12..16].fill(0);
        }
        if mask & 8 != 0 {
            b[28..32].fill(0);
        }
        if mask & 16 != 0 {
            seal(&mut b);
            assert_eq!(check(&b).is_some(), well_formed(&b), "{b:?}");
        }
        if mask & 31 == 31 {
            let floor = u64::from_le_bytes(b[16..24].try_into().unwrap());
            assert_eq!(check(&b), Some(floor));
        } else {
            check(&b);
        }
    }
    // The whole read path: any file length.
    let sim = SimStorage::new(0);
    let dir = Path::new("/db");
    sim.create_dir_all(dir).unwrap();
    let file = sim.open(&dir.join(META_FILE), OpenMode::CreateNew).unwrap();
    if !data.is_empty() {
        file.write_at(data, 0).unwrap();
    }
    drop(file);
    match meta::read(&sim, dir) {
        Ok(floor) => assert_eq!(check(data), Some(floor)),
        Err(Error::Corruption { offset, .. }) => assert!(offset < LEN as u64),
        Err(Error::UnsupportedFormatVersion { .. }) => {}
        Err(e) => panic!("unexpected error kind from read: {e:?}"),
    }
    // Round trip of a floor from the input.
    let mut x = [0u8; 8];
    for (i, b) in data.iter().take(8).enumerate() {
        x[i] = *b;
    }
    let floor = u64::from_le_bytes(x);
    let path = dir.join(META_FILE);
    assert_eq!(meta::decode(&path, &meta::encode(floor)).unwrap(), floor);
});
