//! `checkpoint::meta::decode` (the log floor and the synced log positions
//! in `checkpoint.waypoint`) on arbitrary bytes: never panics, and
//! - on the input as given and with its checksum rewritten (so the magic,
//!   padding, version and entry checks behind the CRC are reached), an
//!   `Ok` re-encodes to exactly the input (a version 1 file with its
//!   version), and every error is `Corruption` at an offset inside the file
//!   naming the given path (offset 0 for a file shorter than 32 bytes), or
//!   `UnsupportedFormatVersion` (only possible behind a valid checksum);
//! - with the checksum fixed, decoding succeeds exactly when magic,
//!   version, count, padding and entries are right;
//! - `meta::read` of the input as a file on a simulated disk (any length)
//!   agrees with `decode`;
//! - for a floor and positions taken from the input, `decode(encode(x))`
//!   is `x`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use waypoint::checkpoint::meta::{self, Meta, ENTRY_LEN, LEN, META_FILE};
use waypoint::io::{OpenMode, SimStorage, Storage};
use waypoint::{Error, Gsn, LogPos};

/// The bytes `m` was decoded from.
fn reencode(m: &Meta) -> Vec<u8> {
    let mut b = meta::encode(m.floor, &m.synced);
    if m.version == 1 {
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        seal(&mut b);
    }
    b
}

fn check(bytes: &[u8]) -> Option<Meta> {
    let path = Path::new("/db").join(META_FILE);
    match meta::decode(&path, bytes) {
        Ok(m) => {
            assert_eq!(
                reencode(&m),
                bytes,
                "a decoded file re-encodes to its input"
            );
            Some(m)
        }
        Err(Error::Corruption {
            path: p, offset, ..
        }) => {
            assert_eq!(p, path);
            assert!(
                offset < bytes.len().max(1) as u64,
                "offset {offset} outside the file"
            );
            None
        }
        Err(Error::UnsupportedFormatVersion {
            found, supported, ..
        }) => {
            assert_ne!(found, supported);
            None
        }
        Err(e) => panic!("unexpected error kind: {e:?}"),
    }
}

/// Magic, version, count, padding and entries as the format wants them.
fn well_formed(b: &[u8]) -> bool {
    let n = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
    if &b[0..8] != b"WPCHKPT\0"
        || b.len() != LEN + ENTRY_LEN * n
        || !(version == 2 || (version == 1 && n == 0))
        || b[b.len() - 4..] != [0; 4]
    {
        return false;
    }
    let mut last = None;
    for i in 0..n {
        let e = &b[24 + ENTRY_LEN * i..24 + ENTRY_LEN * (i + 1)];
        let id = u32::from_le_bytes(e[0..4].try_into().unwrap());
        let pos = u64::from_le_bytes(e[8..16].try_into().unwrap());
        if e[4..8] != [0; 4] || pos == 0 || last.is_some_and(|l| l >= id) {
            return false;
        }
        last = Some(id);
    }
    true
}

/// Rewrite the checksum of a file whose length fits its count.
fn seal(b: &mut [u8]) {
    let end = b.len() - 8;
    let crc = crc32c::crc32c(&b[..end]);
    b[end..end + 4].copy_from_slice(&crc.to_le_bytes());
}

fn fits(b: &[u8]) -> bool {
    b.len() >= LEN
        && b.len() == LEN + ENTRY_LEN * u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if fits(data) {
        let mut sealed = data.to_vec();
        seal(&mut sealed);
        assert_eq!(check(&sealed).is_some(), well_formed(&sealed), "{sealed:?}");
    }
    // Byte 0 picks which fields of the rest are made right, byte 1 the
    // number of entries (0..4), so every check is reached from an empty
    // corpus: bit 0 magic, 1 version, 2 the count, 3 the trailing padding,
    // 5 the entries, 4 the checksum (last).
    if let Some((&[mask, n], rest)) = data.split_first_chunk::<2>() {
        let n = (n % 4) as usize;
        let mut b = rest.to_vec();
        b.resize(LEN + ENTRY_LEN * n, 0);
        let len = b.len();
        if mask & 1 != 0 {
            b[0..8].copy_from_slice(b"WPCHKPT\0");
        }
        if mask & 2 != 0 {
            b[8..12].copy_from_slice(&2u32.to_le_bytes());
        }
        if mask & 4 != 0 {
            b[12..16].copy_from_slice(&(n as u32).to_le_bytes());
        }
        if mask & 8 != 0 {
            b[len - 4..].fill(0);
        }
        if mask & 32 != 0 {
            for i in 0..n {
                let at = 24 + ENTRY_LEN * i;
                let id = i as u32 * 3 + u32::from(b[at] & 1);
                b[at..at + 4].copy_from_slice(&id.to_le_bytes());
                b[at + 4..at + 8].fill(0);
                b[at + 8] |= 1;
            }
        }
        if mask & 16 != 0 && fits(&b) {
            seal(&mut b);
            assert_eq!(check(&b).is_some(), well_formed(&b), "{b:?}");
        }
        if mask & 63 == 63 {
            let floor = u64::from_le_bytes(b[16..24].try_into().unwrap());
            assert_eq!(check(&b).map(|m| m.floor.get()), Some(floor));
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
        Ok(m) => assert_eq!(check(data), m),
        Err(Error::Corruption { offset, .. }) => {
            assert!(offset < data.len().max(1) as u64)
        }
        Err(Error::UnsupportedFormatVersion { .. }) => {}
        Err(e) => panic!("unexpected error kind from read: {e:?}"),
    }
    // Round trip of a floor and positions from the input.
    let mut x = [0u8; 8];
    for (i, b) in data.iter().take(8).enumerate() {
        x[i] = *b;
    }
    let floor = u64::from_le_bytes(x);
    let synced: Vec<(u32, u64)> = data
        .iter()
        .skip(8)
        .take(4)
        .enumerate()
        .map(|(i, &b)| (i as u32 * 2, u64::from(b) + 1))
        .collect();
    let path = dir.join(META_FILE);
    let synced: Vec<(u32, LogPos)> = synced
        .into_iter()
        .map(|(p, pos)| (p, LogPos::new(pos)))
        .collect();
    let m = meta::decode(&path, &meta::encode(Gsn::new(floor), &synced)).unwrap();
    assert_eq!((m.floor, m.synced), (Gsn::new(floor), synced));
});
