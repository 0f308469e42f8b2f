use super::record::{encode_call, encode_catalog, CallFlags, Record, Records};
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
    encode_call(&mut log, LogPos::ZERO, 1, "vote", &[1, 2, 3], CallFlags::default());
    let flags = CallFlags {
        digest: Some(0xDEAD_BEEF),
        barrier: true,
    };
    encode_call(&mut log, LogPos::ZERO, 2, "vote", &[], flags);
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
                barrier: false,
            },
            Record::Call {
                sequence: 2,
                name: "vote",
                params: &[],
                digest: Some(0xDEAD_BEEF),
                barrier: true,
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

/// A call record of the kinds logs wrote before parallel replay (3, 4),
/// framed as they were.
fn old_call(out: &mut Vec<u8>, sequence: u64, params: &[u8], digest: Option<u32>) {
    use crate::logstore::frame;
    let start = frame::begin(out, LogPos::ZERO);
    out.push(if digest.is_some() { 4 } else { 3 });
    frame::put_vint(out, sequence);
    frame::put_vint(out, 4);
    out.extend_from_slice(b"vote");
    frame::put_vint(out, params.len() as u64);
    out.extend_from_slice(params);
    if let Some(d) = digest {
        out.extend_from_slice(&d.to_le_bytes());
    }
    frame::seal(out, start);
}

#[test]
fn calls_of_older_logs_read_as_barriers_and_unknown_flags_are_refused() {
    let mut log = Vec::new();
    old_call(&mut log, 1, &[7], None);
    old_call(&mut log, 2, &[], Some(5));
    crate::logstore::frame::place_at(&mut log, LogPos::ZERO);
    let scanned = scan::<Records>(&log, LogPos::ZERO);
    assert_eq!(scanned.end, ScanEnd::Clean);
    let records: Vec<Record<'_>> = scanned.records.into_iter().map(|(_, r)| r).collect();
    assert_eq!(
        records,
        [
            Record::Call {
                sequence: 1,
                name: "vote",
                params: &[7],
                digest: None,
                barrier: true,
            },
            Record::Call {
                sequence: 2,
                name: "vote",
                params: &[],
                digest: Some(5),
                barrier: true,
            },
        ]
    );
    // A flag this build does not know is refused, not ignored.
    use crate::logstore::frame;
    let mut bad = Vec::new();
    let start = frame::begin(&mut bad, LogPos::ZERO);
    bad.extend_from_slice(&[5, 4, 1, 4]);
    bad.extend_from_slice(b"vote");
    bad.push(0);
    frame::seal(&mut bad, start);
    frame::place_at(&mut bad, LogPos::ZERO);
    let scanned = scan::<Records>(&bad, LogPos::ZERO);
    assert!(scanned.records.is_empty());
    assert!(!matches!(scanned.end, ScanEnd::Clean), "{:?}", scanned.end);
}

#[test]
fn snapshot_triggers_read_back_what_they_write_and_are_checked() {
    use super::options::{CommandOptions, CommandSnapshot};
    use std::time::Duration;
    let size = |s: &str| s.parse::<u64>().ok();
    for t in [
        CommandSnapshot::Off,
        CommandSnapshot::Periodic {
            interval: Duration::from_millis(250),
        },
        CommandSnapshot::LogLimit(1 << 20),
    ] {
        assert_eq!(CommandSnapshot::parse(&t.name(), size), Ok(t));
    }
    assert_eq!(
        CommandSnapshot::parse("periodic=10s", size),
        Ok(CommandSnapshot::Periodic {
            interval: Duration::from_secs(10)
        })
    );
    assert_eq!(
        CommandSnapshot::parse("periodic=5m", size),
        Ok(CommandSnapshot::Periodic {
            interval: Duration::from_secs(300)
        })
    );
    for bad in ["", "periodic", "periodic=", "periodic=5h", "log-limit=x", "continuous"] {
        assert!(CommandSnapshot::parse(bad, size).is_err(), "{bad:?}");
    }
    let with = |snapshot| CommandOptions {
        snapshot,
        ..CommandOptions::default()
    };
    assert!(with(CommandSnapshot::LogLimit(1024)).validate().is_err());
    assert!(with(CommandSnapshot::Periodic {
        interval: Duration::from_millis(1)
    })
    .validate()
    .is_err());
    assert!(with(CommandSnapshot::default()).validate().is_ok());
    let pacing = |sync_interval| CommandOptions {
        sync_interval,
        ..CommandOptions::default()
    };
    assert!(pacing(Duration::ZERO).validate().is_ok());
    assert!(pacing(Duration::from_secs(1)).validate().is_ok());
    let err = pacing(Duration::from_millis(1001)).validate().unwrap_err();
    assert!(err.to_string().contains("sync_interval = 1.001s"), "{err}");
}
