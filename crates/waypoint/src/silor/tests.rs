use super::entry::{self, Entries, Entry, Write};
use super::pepoch::{Installed, PepochState};
use crate::ids::{LogPos, Tid};
use crate::logstore::scan::{scan, ScanEnd};
use crate::persist::{CatalogChange, WriteSet, WriteView};

struct Ws(Vec<(u32, Vec<u8>, Option<Vec<u8>>)>);

impl WriteSet for Ws {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(WriteView<'_>)) {
        for (t, k, v) in &self.0 {
            f(WriteView {
                table: *t,
                key: k,
                value: v.as_deref(),
            });
        }
    }
}

#[test]
fn entries_round_trip_through_frames() {
    let tid = Tid::from_parts(7, 3, 2);
    let ws = Ws(vec![
        (1, b"a".to_vec(), Some(b"one".to_vec())),
        (4, b"bb".to_vec(), None),
    ]);
    let change = CatalogChange::CreateIndex {
        name: "i".into(),
        id: 9,
        table: "t".into(),
    };
    let mut buf = Vec::new();
    entry::encode_commit(&mut buf, LogPos::ZERO, tid, &ws, &[]);
    entry::encode_catalog(&mut buf, LogPos::ZERO, 8, &change);
    // Placed at their stream positions, as a stream appends them.
    crate::logstore::frame::place_at(&mut buf, LogPos::new(64));
    let s = scan::<Entries>(&buf, LogPos::new(64));
    assert_eq!(s.end, ScanEnd::Clean);
    assert_eq!(s.records.len(), 2);
    assert_eq!(
        s.records[0].1,
        Entry::Commit {
            tid,
            writes: vec![
                Write {
                    table: 1,
                    key: b"a",
                    value: Some(b"one")
                },
                Write {
                    table: 4,
                    key: b"bb",
                    value: None
                }
            ]
        }
    );
    assert_eq!(s.records[0].1.epoch(), 7);
    assert_eq!(s.records[1].1, Entry::Catalog { epoch: 8, change });
}

#[test]
fn decoding_any_bytes_never_panics() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..200usize {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % 7) as u8
            })
            .collect();
        let _ = scan::<Entries>(&bytes, LogPos::ZERO);
        let _ = PepochState::decode(&bytes);
    }
}

#[test]
fn the_pepoch_file_round_trips_and_refuses_damage() {
    let state = PepochState {
        generation: 3,
        pepoch: 41,
        sealed: vec![(1, 10), (2, 20)],
        closing: true,
        checkpoint: Some(Installed {
            id: 4,
            el: 30,
            eh: 38,
        }),
    };
    let bytes = state.encode();
    assert_eq!(PepochState::decode(&bytes).unwrap(), state);
    assert_eq!(state.bound(2), Some(20));
    assert_eq!(state.bound(3), Some(41));
    assert_eq!(state.bound(4), None);
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x10;
        assert!(PepochState::decode(&bad).is_err(), "flip at {i} accepted");
    }
    assert!(PepochState::decode(&bytes[..bytes.len() - 1]).is_err());
}

/// A version 1 file (before checkpoints) still reads, as one without an
/// installed checkpoint.
#[test]
fn a_version_1_pepoch_file_still_reads() {
    let state = PepochState {
        generation: 2,
        pepoch: 9,
        sealed: vec![(1, 5)],
        closing: false,
        checkpoint: None,
    };
    let v2 = state.encode();
    // Version 1: the same fields without the checkpoint's 24 bytes.
    let mut v1 = v2[..v2.len() - 4 - 24].to_vec();
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(PepochState::decode(&v1).unwrap(), state);
    let mut v3 = v2.clone();
    v3[8..12].copy_from_slice(&3u32.to_le_bytes());
    let n = v3.len() - 4;
    let crc = crc32c::crc32c(&v3[..n]);
    v3[n..].copy_from_slice(&crc.to_le_bytes());
    assert!(PepochState::decode(&v3).unwrap_err().contains("version 3"));
}
