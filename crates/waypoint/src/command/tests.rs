use super::record::{encode_call, encode_catalog, Record, Records};
use crate::ids::LogPos;
use crate::logstore::scan::{scan, ScanEnd};
use crate::persist::CatalogChange;

#[test]
fn records_round_trip_and_any_damage_is_refused() {
    let mut log = Vec::new();
    encode_catalog(
        &mut log,
        LogPos::ZERO,
        &CatalogChange::CreateTable {
            name: "t".into(),
            id: 3,
        },
    );
    encode_call(&mut log, LogPos::ZERO, 1, "vote", &[1, 2, 3], None);
    encode_call(&mut log, LogPos::ZERO, 2, "vote", &[], Some(0xDEAD_BEEF));
    crate::logstore::frame::place_at(&mut log, LogPos::ZERO);
    let scanned = scan::<Records>(&log, LogPos::ZERO);
    assert_eq!(scanned.end, ScanEnd::Clean);
    let records: Vec<Record<'_>> = scanned.records.into_iter().map(|(_, r)| r).collect();
    assert_eq!(
        records,
        [
            Record::Catalog(CatalogChange::CreateTable {
                name: "t".into(),
                id: 3
            }),
            Record::Call {
                sequence: 1,
                name: "vote",
                params: &[1, 2, 3],
                digest: None,
            },
            Record::Call {
                sequence: 2,
                name: "vote",
                params: &[],
                digest: Some(0xDEAD_BEEF),
            },
        ]
    );
    // Every single-byte change is caught (checksum or decoder), never a
    // panic, never a different record.
    for at in 0..log.len() {
        let mut bad = log.clone();
        bad[at] ^= 0x41;
        let scanned = scan::<Records>(&bad, LogPos::ZERO);
        assert!(scanned.records.len() < 3, "damage at {at} went unseen");
    }
}
