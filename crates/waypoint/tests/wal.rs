//! The write-ahead log through the public API: pipelined commits, the
//! counters in `Database::stats()`, and the commit protocols' basic promise.

use std::sync::Arc;
use waypoint::io::{CrashPolicy, SimStorage};
use waypoint::{CommitProtocol, Database, Options, PerWorkerOptions, Persistence};

fn options(sim: &SimStorage, commit: CommitProtocol) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 64 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            commit,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    }
}

/// One session keeps 64 commits in flight; once their handles resolve, a
/// power loss keeps every one of them.
#[test]
fn pipelined_commits_are_durable_once_their_handles_resolve() {
    for commit in [
        CommitProtocol::RfaGroup,
        CommitProtocol::FlushAll,
        CommitProtocol::Rfa,
        CommitProtocol::Group,
    ] {
        let sim = SimStorage::new(11);
        let db = Database::open("/db", options(&sim, commit)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut s = db.session();
        let mut pending = Vec::new();
        for i in 0..64u32 {
            let mut tx = s.begin().unwrap();
            tx.insert(&t, &i.to_be_bytes(), b"value").unwrap();
            pending.push(tx.commit_pipelined().unwrap());
        }
        // Visible at once, before durability.
        let mut tx = s.begin().unwrap();
        assert_eq!(tx.scan(&t, .., 1000).unwrap().len(), 64);
        drop(tx);
        for p in pending {
            p.wait().unwrap();
        }
        let stats = db.stats();
        assert!(
            stats.persistence.log.commits >= 64,
            "{:?}",
            stats.persistence.log
        );
        // The session's own partition holds its 64 commits' records.
        let own = stats
            .persistence
            .log
            .per_partition
            .iter()
            .max_by_key(|p| p.records)
            .unwrap();
        assert!(
            own.records >= 64 * 2 && own.durable_bytes == own.appended_bytes,
            "{:?}",
            stats.persistence.log.per_partition
        );
        assert_eq!(
            stats
                .persistence
                .log
                .per_partition
                .iter()
                .map(|p| p.appended_bytes)
                .sum::<u64>(),
            stats.persistence.log.appended_bytes
        );
        assert_eq!(
            stats.persistence.log.remote_flush_fraction(),
            0.0,
            "one session has no remote dependencies"
        );
        assert!(
            stats.persistence.log.syncs >= 1 && stats.persistence.log.syncs <= 64 + 2,
            "{commit:?}: {:?}",
            stats.persistence.log
        );
        drop(s);
        drop(t);
        // Power loss without a clean close: only synced bytes survive.
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        let db = Database::open("/db", options(&sim, commit)).unwrap();
        let t = db.table("t").unwrap();
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        assert_eq!(
            tx.scan(&t, .., 1000).unwrap().len(),
            64,
            "{commit:?}: a resolved pipelined commit was lost"
        );
        let report = db.recovery_report().unwrap();
        assert!(report.records > 0 && report.winners >= 64, "{report:?}");
    }
}

/// Commit rows `0..n` (50 bytes each) with `options`, then stop without a
/// clean close (the log stays), keeping every write as a killed process
/// would.
fn insert_and_kill(sim: &SimStorage, options: Options, n: u32) {
    let db = Database::open("/db", options).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    for i in 0..n {
        let mut tx = s.begin().unwrap();
        tx.insert(&t, &i.to_be_bytes(), &[i as u8; 50]).unwrap();
        tx.commit().unwrap();
    }
    drop((s, t));
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
}

/// Flush-all options with log segments of `bytes`: several segments for a
/// few hundred small commits.
fn small_segments(sim: &SimStorage, bytes: u64) -> Options {
    options(sim, CommitProtocol::FlushAll).with_per_worker(|o| {
        o.wal_segment_bytes = bytes;
    })
}

/// [`insert_and_kill`] into one growing log segment, which it returns
/// (without preallocation: the first segment would give way to a spare as
/// soon as one is ready, and the tests below damage one known segment).
fn committed_log(sim: &SimStorage, n: u32) -> std::path::PathBuf {
    let options = options(sim, CommitProtocol::FlushAll).with_per_worker(|o| {
        o.wal_preallocate = false;
    });
    insert_and_kill(sim, options, n);
    let dir = std::path::Path::new("/db/wal");
    let mut segments = Vec::new();
    for part in waypoint::io::Storage::list_dir(sim, dir).unwrap() {
        for (_, seg) in waypoint::logstore::segment::list_segments(sim, &part).unwrap() {
            // More than the catalog's few records (its own partition).
            if sim.read_current(&seg).is_some_and(|b| b.len() > 1024) {
                segments.push(seg);
            }
        }
    }
    assert_eq!(
        segments.len(),
        1,
        "one session wrote one segment: {segments:?}"
    );
    segments.pop().unwrap()
}

fn rows(db: &Database) -> usize {
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.scan(&t, .., usize::MAX).unwrap().len()
}

/// A damaged last record is the end of the log: open succeeds, reports the
/// torn tail, and every earlier commit is there.
#[test]
fn a_torn_log_tail_is_the_end_of_the_log() {
    let sim = SimStorage::new(21);
    let segment = committed_log(&sim, 100);
    let len = sim.read_current(&segment).unwrap().len() as u64;
    sim.corrupt(&segment, len - 20, 0x5a).unwrap();
    let db = Database::open("/db", options(&sim, CommitProtocol::FlushAll)).unwrap();
    let report = db.recovery_report().unwrap().clone();
    assert_eq!(report.torn_tails, 1, "{report:?}");
    // The last record was the 100th commit record: its transaction lost
    // its commit, every earlier one is intact.
    assert_eq!(rows(&db), 99);
    db.check_integrity().unwrap();
}

/// A damaged record followed by records that were written after it was
/// durable is corruption: open fails naming the segment and the offset,
/// and nothing is silently dropped.
#[test]
fn a_damaged_record_in_the_middle_of_the_log_is_corruption() {
    let sim = SimStorage::new(22);
    let segment = committed_log(&sim, 100);
    let bytes = sim.read_current(&segment).unwrap();
    let middle = bytes.len() as u64 / 2;
    // The error names the start of the record holding the damaged byte.
    let header = waypoint::logstore::segment::HEADER_SIZE;
    let base = waypoint::logstore::segment::parse_segment_name(&segment).unwrap();
    let scan = waypoint::wal::record::scan_segment(&bytes[header as usize..], base);
    let damaged = scan
        .records
        .iter()
        .map(|(at, _)| header + at)
        .filter(|&at| at <= middle)
        .max()
        .unwrap();
    sim.corrupt(&segment, middle, 0x01).unwrap();
    match Database::open("/db", options(&sim, CommitProtocol::FlushAll)) {
        Err(waypoint::Error::Corruption {
            path,
            offset,
            detail,
        }) => {
            assert_eq!(path, segment, "{detail}");
            assert_eq!(
                offset, damaged,
                "offset {offset}, damage at {middle}: {detail}"
            );
        }
        other => panic!(
            "expected corruption naming {}, got {:?}",
            segment.display(),
            other.map(|_| ())
        ),
    }
}

/// A segment missing from the middle of a partition's log (deleted by
/// hand, lost with a disk) is corruption naming the segment after the gap;
/// recovery never skips over lost history.
#[test]
fn a_missing_log_segment_is_corruption() {
    let sim = SimStorage::new(23);
    let small_segments = || small_segments(&sim, 4096);
    insert_and_kill(&sim, small_segments(), 200);
    // The session's partition has several segments; delete one in the middle.
    let mut longest = Vec::new();
    for part in waypoint::io::Storage::list_dir(&sim, std::path::Path::new("/db/wal")).unwrap() {
        let segs = waypoint::logstore::segment::list_segments(&sim, &part).unwrap();
        if segs.len() > longest.len() {
            longest = segs.into_iter().map(|(_, path)| path).collect();
        }
    }
    assert!(longest.len() >= 3, "{longest:?}");
    let victim = longest[longest.len() / 2].clone();
    let after = longest[longest.len() / 2 + 1].clone();
    waypoint::io::Storage::remove(&sim, &victim).unwrap();
    match Database::open("/db", small_segments()) {
        Err(waypoint::Error::Corruption { path, detail, .. }) => {
            assert_eq!(path, after, "{detail}");
            assert!(detail.contains("missing"), "{detail}");
        }
        other => panic!(
            "expected corruption naming {}, got {:?}",
            after.display(),
            other.map(|_| ())
        ),
    }
}

/// Regression (found in review, 2026-11-22): with pipelining, a session's
/// commit T1 was acknowledged after flushing only its own partition while
/// its unresolved predecessor T0 depended on another session's unflushed
/// record on the same page; power loss then cut the page's log at T0's
/// dependency, recovery undid T0 and T1 (`committed_beyond_gap`), and the
/// acknowledged T1 was lost. A commit now inherits the remote dependency of
/// an unresolved predecessor.
#[test]
fn pipelined_successor_of_a_remote_dependent_commit_survives_power_loss() {
    use waypoint::io::{Fault, FaultKind};
    for commit in [CommitProtocol::Rfa, CommitProtocol::RfaGroup] {
        let sim = SimStorage::new(7);
        let db = Database::open("/db", options(&sim, commit)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut a = db.session();
        let mut tx = a.begin().unwrap();
        tx.insert(&t, b"a", b"v0").unwrap();
        tx.insert(&t, b"b", b"v0").unwrap();
        tx.commit().unwrap();
        let mut b = db.session();
        // B's log writes fail: B's commit never becomes durable ("its
        // writer is slow, then power fails").
        sim.inject(
            Fault::at(sim.op_count(), FaultKind::Eio).on_path(format!("p{:05}/0", b.slot())),
        );
        let mut tx = b.begin().unwrap();
        tx.update(&t, b"b", b"vB").unwrap();
        let pb = tx.commit_pipelined().unwrap();
        let mut tx = a.begin().unwrap();
        tx.update(&t, b"a", b"v1").unwrap();
        let p0 = tx.commit_pipelined().unwrap(); // depends on B (same page)
        let mut tx = a.begin().unwrap();
        tx.update(&t, b"a", b"v2").unwrap();
        let acknowledged = tx.commit_pipelined().unwrap().wait().is_ok();
        drop((a, b, t, p0, pb));
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        sim.clear_faults();
        let db = Database::open("/db", options(&sim, commit)).unwrap();
        let t = db.table("t").unwrap();
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        let a_now = tx.get(&t, b"a").unwrap();
        if acknowledged {
            assert_eq!(
                a_now.as_deref(),
                Some(&b"v2"[..]),
                "{commit:?}: an acknowledged commit was lost"
            );
        }
        assert_eq!(
            db.recovery_report().unwrap().committed_beyond_gap,
            0,
            "{commit:?}"
        );
    }
}

/// Overwrite the 32-byte header of `segment` with `header` (synced) and
/// return the file's bytes afterwards.
fn replace_header(sim: &SimStorage, segment: &std::path::Path, header: &[u8]) -> Vec<u8> {
    let file = waypoint::io::Storage::open(sim, segment, waypoint::io::OpenMode::Existing).unwrap();
    file.write_at(header, 0).unwrap();
    file.sync_data().unwrap();
    drop(file);
    sim.read_current(segment).unwrap()
}

/// A segment written in another log format version is refused with a typed
/// error naming it, and left as it was: this build must not misread it, and
/// must not truncate or delete it as if it were a torn tail. The header is
/// built here from docs/FORMAT.md, not by the engine's own encoder.
#[test]
fn a_log_segment_of_another_format_version_is_refused_untouched() {
    let sim = SimStorage::new(12);
    let segment = committed_log(&sim, 20);
    let before = sim.read_current(&segment).unwrap();
    assert_eq!(&before[0..8], b"WPLOGSEG", "segments start with the magic");
    assert_eq!(u32::from_le_bytes(before[8..12].try_into().unwrap()), 6);
    // Version 2: the log of a build before splits logged small records
    // (and before checksums were salted with positions, version 4). Up to
    // version 5 the checksum covered bytes 0..24 and bytes 28..32 were zero.
    let mut header = before[..32].to_vec();
    header[8..12].copy_from_slice(&2u32.to_le_bytes());
    header[28..32].fill(0);
    let crc = crc32c::crc32c(&header[0..24]);
    header[24..28].copy_from_slice(&crc.to_le_bytes());
    let changed = replace_header(&sim, &segment, &header);
    match Database::open("/db", options(&sim, CommitProtocol::FlushAll)) {
        Err(waypoint::Error::UnsupportedFormatVersion {
            path,
            found,
            supported,
        }) => {
            assert_eq!(path, segment);
            assert_eq!((found, supported), (2, 6));
        }
        other => panic!("expected UnsupportedFormatVersion, got {:?}", other.err()),
    }
    assert_eq!(
        sim.read_current(&segment).unwrap(),
        changed,
        "the refused segment is left untouched"
    );
}

/// A segment whose header names another persistence scheme (byte 28, the
/// scheme tag) is refused with a typed error naming it and the scheme, and
/// left as it was: the per-worker WAL never reads another scheme's records
/// as its own.
#[test]
fn a_log_segment_of_another_scheme_is_refused_untouched() {
    let sim = SimStorage::new(13);
    let segment = committed_log(&sim, 20);
    let before = sim.read_current(&segment).unwrap();
    assert_eq!(before[28], 2, "the per-worker scheme's tag");
    let mut header = before[..32].to_vec();
    header[28] = 1; // the none scheme's tag
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[0..24]), &header[28..32]);
    header[24..28].copy_from_slice(&crc.to_le_bytes());
    let changed = replace_header(&sim, &segment, &header);
    match Database::open("/db", options(&sim, CommitProtocol::FlushAll)) {
        Err(e @ waypoint::Error::LogSchemeMismatch { .. }) => {
            let waypoint::Error::LogSchemeMismatch {
                path,
                found,
                expected,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((path, *found), (&segment, 1));
            assert_eq!(*expected, waypoint::SchemeKind::PerWorker);
            assert!(e.to_string().contains("none scheme"), "{e}");
        }
        other => panic!("expected LogSchemeMismatch, got {:?}", other.err()),
    }
    assert_eq!(
        sim.read_current(&segment).unwrap(),
        changed,
        "the refused segment is left untouched"
    );
}

/// Replace the record at `offset` of `segment` (a file offset) with what
/// `forge` encodes from it (with `record::encode`), sealed at its position:
/// a record that is valid on disk but wrong, as a writer bug or a
/// hand-edited log would leave it. A record's length depends on its values,
/// so the records after it are encoded again at their moved positions.
fn forge_record(
    sim: &SimStorage,
    segment: &std::path::Path,
    offset: usize,
    forge: impl Fn(waypoint::wal::record::Record<'_>, &mut Vec<u8>),
) {
    use waypoint::wal::record;
    let bytes = sim.read_current(segment).unwrap();
    let header = waypoint::logstore::segment::HEADER_SIZE as usize;
    let base = waypoint::logstore::segment::parse_segment_name(segment).unwrap();
    let scan = record::scan_segment(&bytes[header..], base);
    let mut tail = Vec::new();
    for (at, rec) in &scan.records {
        let at = header + *at as usize;
        if at == offset {
            forge(*rec, &mut tail);
        } else if at > offset {
            record::encode(&rec.header, &rec.body, &mut tail);
        }
    }
    assert!(!tail.is_empty(), "no record at {offset}");
    waypoint::logstore::frame::place_at(&mut tail, base.advance((offset - header) as u64));
    // Zeros where the old records ran past the new ones.
    let old_end = header + scan.valid_len as usize;
    tail.resize(tail.len().max(old_end - offset), 0);
    let file = waypoint::io::Storage::open(sim, segment, waypoint::io::OpenMode::Existing).unwrap();
    file.write_at(&tail, offset as u64).unwrap();
    file.sync_data().unwrap();
}

/// File offsets of the insert records of a segment, in log order.
fn insert_offsets(sim: &SimStorage, segment: &std::path::Path) -> Vec<usize> {
    let bytes = sim.read_current(segment).unwrap();
    let base = waypoint::logstore::segment::parse_segment_name(segment).unwrap();
    let header = waypoint::logstore::segment::HEADER_SIZE as usize;
    let scan = waypoint::wal::record::scan_segment(&bytes[header..], base);
    scan.records
        .iter()
        .filter(|(_, r)| r.body.kind() == waypoint::wal::record::RecordKind::Insert)
        .map(|(o, _)| header + *o as usize)
        .collect()
}

/// Regression (found by the `recovery` fuzz target, 2026-11-22): a
/// checksum-valid record naming a page id far beyond any data file made
/// redo overflow computing the page's offset (a panic in debug builds, a
/// wrong offset otherwise). Analysis now refuses it as corruption naming
/// the segment and the record's offset.
#[test]
fn a_log_record_naming_a_page_outside_the_file_is_corruption() {
    let sim = SimStorage::new(31);
    let segment = committed_log(&sim, 40);
    let at = insert_offsets(&sim, &segment)[3];
    forge_record(&sim, &segment, at, |rec, out| {
        let header = waypoint::wal::record::RecordHeader {
            page: 1 << 56,
            ..rec.header
        };
        waypoint::wal::record::encode(&header, &rec.body, out);
    });
    let detail = open_refuses_as_corruption_at(&sim, &segment, at);
    assert!(detail.contains("outside"), "{detail}");
}

/// Opening `/db` fails with corruption naming `segment` and the record at
/// `at`; returns the error's detail.
fn open_refuses_as_corruption_at(sim: &SimStorage, segment: &std::path::Path, at: usize) -> String {
    match Database::open("/db", options(sim, CommitProtocol::FlushAll)) {
        Err(waypoint::Error::Corruption {
            path,
            offset,
            detail,
        }) => {
            assert_eq!(path, segment, "{detail}");
            assert_eq!(offset, at as u64, "{detail}");
            detail
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// A checksum-valid record with a GSN at or above 2^63 would collide with
/// the reservation bit of the partition's clock word (`Partition::clock`):
/// analysis refuses it as corruption naming the segment and the offset.
#[test]
fn a_log_record_with_a_gsn_beyond_the_range_is_corruption() {
    let sim = SimStorage::new(33);
    let segment = committed_log(&sim, 40);
    let at = *insert_offsets(&sim, &segment).last().unwrap();
    forge_record(&sim, &segment, at, |rec, out| {
        let header = waypoint::wal::record::RecordHeader {
            gsn: waypoint::wal::partition::MAX_GSN,
            ..rec.header
        };
        waypoint::wal::record::encode(&header, &rec.body, out);
    });
    let detail = open_refuses_as_corruption_at(&sim, &segment, at);
    assert!(detail.contains("GSN range"), "{detail}");
}

/// Regression (found by the `recovery` fuzz target, 2026-11-22): a
/// checksum-valid insert whose key lies outside its page's fences tripped a
/// debug assertion in the node code (and in release builds silently broke
/// the tree). Redo now refuses it as corruption.
#[test]
fn a_redo_record_with_a_key_outside_its_page_is_corruption() {
    let sim = SimStorage::new(32);
    let segment = committed_log(&sim, 400);
    // The last insert went to the rightmost leaf, whose lower fence is a
    // real key after the splits: a key of zeros lies below it.
    let at = *insert_offsets(&sim, &segment).last().unwrap();
    forge_record(&sim, &segment, at, |rec, out| {
        use waypoint::wal::record::RecordBody;
        let RecordBody::Insert { key, value } = rec.body else {
            panic!("not an insert: {rec:?}")
        };
        let zeros = vec![0; key.len()];
        let body = RecordBody::Insert { key: &zeros, value };
        waypoint::wal::record::encode(&rec.header, &body, out);
    });
    match Database::open("/db", options(&sim, CommitProtocol::FlushAll)) {
        Err(waypoint::Error::Corruption { detail, .. }) => {
            assert!(detail.contains("fences"), "{detail}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}
/// Regression (found by the `recovery` fuzz target, saved as
/// `fuzz/regressions/recovery/redo-image-not-a-node`): a checksum-valid page
/// image whose bytes are not a valid node was written into the page, and
/// the next record of that page, an insert, tripped `NodeMut::insert_at`'s
/// precondition check (a panic in debug builds; in release builds an
/// insert into a node whose keys are out of order). Redo now checks an
/// image of a B+-tree node with `Node::validate` before the page takes it
/// and refuses one that fails as corruption.
#[test]
fn a_redo_page_image_that_is_no_valid_node_is_corruption() {
    use waypoint::wal::record::{self, PageImage, RecordBody, RecordKind};
    let sim = SimStorage::new(34);
    let segment = committed_log(&sim, 400);
    let bytes = sim.read_current(&segment).unwrap();
    let header = waypoint::logstore::segment::HEADER_SIZE as usize;
    let base = waypoint::logstore::segment::parse_segment_name(&segment).unwrap();
    let scan = record::scan_segment(&bytes[header..], base);
    // The last split's new right leaf: an image, then inserts made on it.
    let leaf = waypoint::buffer::PageKind::BtreeLeaf as u8;
    let at = scan
        .records
        .iter()
        .enumerate()
        .filter(|(i, (_, r))| {
            r.body.kind() == RecordKind::Image
                && r.header.page_kind == leaf
                && scan.records[i + 1..].iter().any(|(_, next)| {
                    next.body.kind() == RecordKind::Insert
                        && next.header.page == r.header.page
                        && next.header.prev_gsn == r.header.gsn
                })
        })
        .map(|(_, (o, _))| header + *o as usize)
        .next_back()
        .expect("a split's leaf image followed by an insert on it");
    forge_record(&sim, &segment, at, |rec, out| {
        let RecordBody::Image(image) = rec.body else {
            panic!("not an image: {rec:?}")
        };
        let mut page = vec![0u8; 32];
        page.extend(image.image_body(4096).unwrap());
        // The last key's bytes above every key, its stored head left as it
        // was: binary search (by heads) still puts the next key after it.
        let node = waypoint::btree::node::Node::new(&page);
        let last = node.key(node.count() - 1).unwrap();
        let from = last.as_ptr() as usize - page.as_ptr() as usize;
        let len = last.len();
        page[from..from + len].fill(0xff);
        let body = RecordBody::Image(PageImage::from_body(&page[32..]));
        record::encode(&rec.header, &body, out);
    });
    match Database::open("/db", options(&sim, CommitProtocol::FlushAll)) {
        Err(waypoint::Error::Corruption { detail, .. }) => {
            assert!(detail.contains("not a valid node"), "{detail}");
            assert!(detail.contains("log partition"), "{detail}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}
/// Found by the TPC-C matrix (remote-flush fraction 0.73 with one worker on
/// a reopened database): a TID written before the reopen names a slot that
/// a session of this run may hold now, whose partition has made nothing
/// durable yet, so reading old rows looked like a remote dependency. A TID
/// from an earlier run is durable.
#[test]
fn reading_rows_of_an_earlier_run_is_no_remote_dependency() {
    let sim = SimStorage::new(41);
    let opts = || options(&sim, CommitProtocol::RfaGroup);
    let db = Database::open("/db", opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let (mut s0, mut s1) = (db.session(), db.session());
    for (s, key) in [(&mut s0, b"k0"), (&mut s1, b"k1")] {
        let mut tx = s.begin().unwrap();
        tx.upsert(&t, key, b"v").unwrap();
        tx.commit().unwrap();
    }
    drop((s0, s1));
    db.close().unwrap();

    let db = Database::open("/db", opts()).unwrap();
    let t = db.table("t").unwrap();
    // The same slots again; s1's partition exists and is empty.
    let (mut s0, _s1) = (db.session(), db.session());
    let mut tx = s0.begin().unwrap();
    assert_eq!(tx.get(&t, b"k1").unwrap(), Some(b"v".to_vec()));
    tx.upsert(&t, b"k2", b"w").unwrap();
    tx.commit().unwrap();
    let wal = db.stats().persistence.log;
    assert_eq!(wal.commits, 1);
    assert_eq!(wal.remote_flush_commits, 0, "{wal:?}");
}

/// Segment preallocation across a crash and a clean close: spare files
/// (zero-filled, never segments) left by a killed process do not disturb
/// recovery, segments renamed from spares recover like any other, and a
/// clean close leaves no log file of either kind.
#[test]
fn spare_segments_survive_a_crash_harmlessly_and_a_clean_close_removes_them() {
    let sim = SimStorage::new(31);
    let small_segments = || small_segments(&sim, 8192);
    let files = |sim: &SimStorage| -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for part in waypoint::io::Storage::list_dir(sim, std::path::Path::new("/db/wal")).unwrap() {
            out.extend(waypoint::io::Storage::list_dir(sim, &part).unwrap());
        }
        out
    };
    let preallocated = |sim: &SimStorage| {
        files(sim)
            .iter()
            .filter(|f| waypoint::logstore::segment::parse_segment_name(f).is_some())
            .filter(|f| sim.read_current(f).is_some_and(|b| b.ends_with(&[0; 4096])))
            .count()
    };
    // Commits until a segment was renamed from a spare and a new spare is
    // waiting: the spare thread runs beside the commits, and on a loaded
    // machine 300 commits could all land before it had one ready.
    let db = Database::open("/db", small_segments()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    let mut n = 0u32;
    while n < 300
        || preallocated(&sim) == 0
        || !files(&sim)
            .iter()
            .any(|f| waypoint::logstore::spare::is_spare(f))
    {
        assert!(
            n < 100_000,
            "no segment was renamed from a spare in {n} commits"
        );
        let mut tx = s.begin().unwrap();
        tx.insert(&t, &n.to_be_bytes(), &[n as u8; 50]).unwrap();
        tx.commit().unwrap();
        n += 1;
    }
    drop((s, t));
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    assert!(
        files(&sim)
            .iter()
            .any(|f| waypoint::logstore::spare::is_spare(f)),
        "the killed process left its spares"
    );
    assert!(
        preallocated(&sim) > 0,
        "some segments were renamed from spares"
    );
    let db = Database::open("/db", small_segments()).unwrap();
    assert_eq!(rows(&db), n as usize, "every acknowledged insert recovered");
    db.close().unwrap();
    assert_eq!(
        files(&sim),
        Vec::<std::path::PathBuf>::new(),
        "a clean close leaves no log files"
    );
}

/// Segment recycling across power losses (log format 4). Checkpoints prune
/// a small log, and pruned segments come back as new ones with their old
/// records still in the file behind the new ones. Recovery must read only
/// this life's records. A middle segment whose file holds old records
/// after its own is not a torn tail: the next segment starts where its
/// records stop (without that rule open failed, calling the next segment
/// lost). The old records must not be read as records: that the salted
/// checksums keep them out is shown at the scan level, by
/// `a_recycled_files_older_records_end_the_scan_and_are_not_read` in
/// `wal::record`, since here they are read only when this life's records
/// happen to end where an old record starts.
/// Segments, all but the newest `skip` of each partition, whose records
/// stop before their file does, where a recycled file's old life's bytes
/// follow (not zeros).
fn stale_tails(sim: &SimStorage, skip: usize) -> usize {
    let mut stale = 0;
    for part in waypoint::io::Storage::list_dir(sim, std::path::Path::new("/db/wal")).unwrap() {
        let segments = waypoint::logstore::segment::list_segments(sim, &part).unwrap();
        for (start, path) in segments.iter().rev().skip(skip) {
            // The checkpointer may prune or recycle a segment between the
            // listing and the read: a segment gone is no stale tail.
            let Some(bytes) = sim.read_current(path) else {
                continue;
            };
            let records = &bytes[waypoint::logstore::segment::HEADER_SIZE as usize..];
            let scan = waypoint::wal::record::scan_segment(records, *start);
            if records[scan.valid_len as usize..].iter().any(|&b| b != 0) {
                stale += 1;
            }
        }
    }
    stale
}

#[test]
fn recycled_segments_recover_every_commit_after_power_loss() {
    let sim = SimStorage::new(43);
    let options = || {
        small_segments(&sim, 8 << 10).with_per_worker(|o| {
            o.wal_limit_bytes = 128 << 10;
            o.checkpoint_shards = 4;
        })
    };
    let mut committed = 0u32;
    for (round, policy) in [
        CrashPolicy::DropAll,
        CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        },
        CrashPolicy::KeepAll,
    ]
    .into_iter()
    .enumerate()
    {
        let db = Database::open("/db", options()).unwrap();
        let t = if round == 0 {
            db.create_table("t").unwrap()
        } else {
            assert_eq!(rows(&db), committed as usize, "round {round}");
            db.table("t").unwrap()
        };
        let mut s = db.session();
        let mut target = committed + 2000;
        loop {
            while committed < target {
                let mut tx = s.begin().unwrap();
                // Uneven lengths, so segments overshoot their size unevenly
                // and a recycled file is often longer than its new records.
                let value = vec![round as u8; 20 + (committed as usize * 37) % 700];
                tx.insert(&t, &committed.to_be_bytes(), &value).unwrap();
                tx.commit().unwrap();
                committed += 1;
            }
            // Only about one live segment in four is a recycled file, and
            // half of those outgrow their old life: a third of the time
            // 2,000 commits left no stale tail to recover over. Go on until
            // one is far enough from the log's end to be a middle segment
            // whatever the crash drops.
            if round > 0 || stale_tails(&sim, 2) > 0 || committed > 40_000 {
                break;
            }
            target += 200;
        }
        let wal = db.stats().persistence.log;
        assert!(wal.segments_recycled >= 5, "round {round}: {wal:?}");
        drop((s, t));
        std::mem::forget(db);
        sim.crash(policy);
        if round == 0 {
            assert!(
                stale_tails(&sim, 1) > 0,
                "no middle segment holds old records"
            );
        }
    }
    let db = Database::open("/db", options()).unwrap();
    assert_eq!(rows(&db), committed as usize);
    db.check_integrity().unwrap();
    db.close().unwrap();
}
