//! Analysis on any number of threads decides as on one: the same ends,
//! records, commits and file changes, with every structure modification
//! numbered once per partition and every record's bytes where it says.

use super::Analysis;
use crate::ids::Gsn;
use crate::io::{CrashPolicy, SimStorage};
use crate::persist::SchemeKind;
use crate::wal::record;
use crate::{CheckpointMode, Database, Options, PerWorkerOptions, Persistence};
use std::path::Path;
use std::sync::Arc;

/// Everything analysis decided, comparable across runs.
fn decided(a: &Analysis) -> String {
    let mut out = String::new();
    for l in &a.logs {
        out += &format!(
            "{:?} {} {} {:?} {:?} {:?} {:?}\n",
            l.recovered, l.bytes, l.torn_tails, l.end_segment, l.actions, l.commits, l.ended
        );
        for r in &l.records {
            out += &format!(
                "{} {} {} {} {} {:?} {} {} {:?}\n",
                r.gsn,
                r.txn,
                r.page,
                r.prev,
                r.tree,
                r.kind,
                r.compensation,
                r.smo,
                l.bytes_of(r)
            );
        }
    }
    out
}

/// Structure modifications are numbered 1, 2, .. in log order within each
/// partition, each number on one run of adjacent records, and each
/// record's bytes decode to the record itself. Returns how many
/// modifications lie in a segment after the partition's first.
fn check_numbering_and_bytes(a: &Analysis) -> usize {
    let mut in_later_segments = 0;
    for l in &a.logs {
        let mut last = 0;
        for r in &l.records {
            let rec = record::decode(l.bytes_of(r)).expect("a kept record decodes");
            assert_eq!((rec.header.gsn, rec.header.page), (r.gsn, r.page));
            if r.smo != 0 && r.smo != last {
                assert_eq!(r.smo, last + 1, "modifications numbered in log order");
                last = r.smo;
                in_later_segments += usize::from(r.arena > 0);
            }
        }
        assert_eq!(last, l.smos, "every modification numbered");
    }
    in_later_segments
}

/// A per-worker database on `sim` whose log is cut into 16 KiB segments
/// and never pruned.
fn open_with_small_segments(sim: &SimStorage) -> Database {
    let options = Options {
        page_size: Some(4096),
        buffer_pool_bytes: 256 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            wal_segment_bytes: 16 << 10,
            checkpoint: CheckpointMode::None,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    };
    Database::open(Path::new("/db"), options).unwrap()
}

#[test]
fn analysis_on_any_number_of_threads_decides_as_on_one() {
    let mut renumbered = 0;
    for seed in 0..4 {
        let sim = SimStorage::new(seed);
        let db = open_with_small_segments(&sim);
        let t = db.create_table("t").unwrap();
        std::thread::scope(|s| {
            for th in 0..3u32 {
                let (db, t) = (&db, &t);
                s.spawn(move || {
                    let mut session = db.session();
                    for i in 0..300u32 {
                        let mut tx = session.begin().unwrap();
                        // Interleaved keys: every session splits leaves.
                        tx.insert(t, &(i * 3 + th).to_be_bytes(), &[th as u8; 60])
                            .unwrap();
                        tx.commit().unwrap();
                    }
                });
            }
        });
        std::mem::forget(db);
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        let log_dir = Path::new("/db").join(crate::db::WAL_DIR);
        let read = |threads| Analysis::read_for(SchemeKind::PerWorker, &sim, &log_dir, Gsn::ZERO, threads);
        let one = read(1).unwrap();
        renumbered += check_numbering_and_bytes(&one);
        let expected = decided(&one);
        for threads in [2, 3, 8] {
            let a = read(threads).unwrap();
            assert_eq!(decided(&a), expected, "seed {seed}, {threads} threads");
        }
    }
    assert!(
        renumbered >= 4,
        "structure modifications numbered after a partition's first segment: {renumbered}"
    );
}

/// A log that ends after the first record of a structure modification
/// (its other images never written) ends before it: the modification is
/// not kept, the records before it are, and the tail counts as torn.
#[test]
fn a_log_ending_inside_a_structure_modification_ends_before_it() {
    use crate::io::{OpenMode, Storage};
    use crate::logstore::segment::{self, parse_segment_name};
    let sim = SimStorage::new(11);
    let db = open_with_small_segments(&sim);
    let t = db.create_table("t").unwrap();
    let mut session = db.session();
    for i in 0..600u32 {
        let mut tx = session.begin().unwrap();
        tx.insert(&t, &i.to_be_bytes(), &[1; 60]).unwrap();
        tx.commit().unwrap();
    }
    drop(session);
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let log_dir = Path::new("/db").join(crate::db::WAL_DIR);
    let read = || Analysis::read_for(SchemeKind::PerWorker, &sim, &log_dir, Gsn::ZERO, 2).unwrap();
    let whole = read();
    // A structure modification of several images past the first segment.
    let (l, first) = whole
        .logs
        .iter()
        .find_map(|l| {
            let i = l.records.iter().position(|r| {
                r.smo > 1 && r.arena > 0 && l.records.iter().filter(|o| o.smo == r.smo).count() > 1
            })?;
            Some((l, i))
        })
        .expect("a structure modification of several images past the first segment");
    let (smo, arena, at) = (l.records[first].smo, l.records[first].arena, l.records[first].at);
    let second = &l.records[first + 1];
    assert_eq!((second.smo, second.arena), (smo, arena), "its next image in the same segment");
    // Cut the segment after the modification's first image; drop the
    // partition's later segments.
    let mut paths: Vec<_> = sim
        .list_dir(&l.dir)
        .unwrap()
        .into_iter()
        .filter_map(|p| Some((parse_segment_name(&p)?, p)))
        .collect();
    paths.sort();
    let (start, cut) = paths[arena as usize].clone();
    let file = sim.open(&cut, OpenMode::Existing).unwrap();
    file.set_len(second.at as u64).unwrap();
    file.sync_data().unwrap();
    for (_, later) in &paths[arena as usize + 1..] {
        sim.remove(later).unwrap();
    }
    let id = l.recovered.id;
    let before: Vec<_> = l.records[..first].iter().map(|r| r.gsn).collect();
    let cut_read = read();
    let p = cut_read.logs.iter().find(|p| p.recovered.id == id).unwrap();
    assert_eq!(
        p.recovered.end,
        start.advance(at as u64 - segment::HEADER_SIZE),
        "the log ends where the modification began"
    );
    assert_eq!(p.records.iter().map(|r| r.gsn).collect::<Vec<_>>(), before);
    assert_eq!((p.smos, p.torn_tails), (smo - 1, 1));
}

/// Redo on any number of threads (so with one page shard, or with many
/// per thread, several of them holding pages) leaves every page it
/// touches byte for byte as redo on one thread does, and reports the same
/// work.
#[test]
fn redo_on_any_number_of_threads_leaves_every_page_as_on_one() {
    use crate::buffer::pool::{BufferPool, PoolConfig};
    use crate::io::{OpenMode, Storage};
    let mut redone = 0;
    for seed in 20..24 {
        let sim = SimStorage::new(seed);
        let db = open_with_small_segments(&sim);
        let t = db.create_table("t").unwrap();
        std::thread::scope(|s| {
            for th in 0..3u32 {
                let (db, t) = (&db, &t);
                s.spawn(move || {
                    let mut session = db.session();
                    for i in 0..400u32 {
                        let mut tx = session.begin().unwrap();
                        // Values large enough for the pages to span
                        // several of the shards' 64-page blocks.
                        tx.upsert(t, &(i * 3 + th).to_be_bytes(), &[th as u8; 500])
                            .unwrap();
                        if i % 4 == 3 {
                            // Another session's key: pages change in
                            // several partitions' chains.
                            let other = (i - 3) * 3 + (th + 1) % 3;
                            tx.upsert(t, &other.to_be_bytes(), &[i as u8; 40]).unwrap();
                        }
                        let _ = tx.commit();
                    }
                });
            }
        });
        std::mem::forget(db);
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: false,
        });
        let log_dir = Path::new("/db").join(crate::db::WAL_DIR);
        let read = |threads| Analysis::read_for(SchemeKind::PerWorker, &sim, &log_dir, Gsn::ZERO, threads).unwrap();
        read(1).apply(&sim).unwrap();
        let pages_after = |threads: usize| {
            let analysis = read(threads);
            let mut pages: Vec<u64> = analysis
                .logs
                .iter()
                .flat_map(|l| l.records.iter().map(|r| r.page))
                .collect();
            pages.sort_unstable();
            pages.dedup();
            let blocks: std::collections::BTreeSet<u64> = pages.iter().map(|p| p >> 6).collect();
            assert!(blocks.len() >= 3, "seed {seed}: pages in {} blocks of 64", blocks.len());
            let file = sim
                .open(&Path::new("/db").join(crate::db::DATA_FILE), OpenMode::Existing)
                .unwrap();
            let pool = BufferPool::start(
                PoolConfig {
                    page_size: 4096,
                    frames: 4096,
                },
                file,
                1,
                Vec::new(),
            )
            .unwrap();
            let recovery = analysis.redo(&pool, threads).unwrap();
            let r = &recovery.report;
            let work = (
                r.records_redone,
                r.pages_redone,
                r.gaps,
                r.committed_beyond_gap,
                r.redo_decided_serially,
            );
            let bytes: Vec<(u64, Vec<u8>)> = pages
                .iter()
                .map(|&p| (p, pool.exclusive(p).unwrap().data().to_vec()))
                .collect();
            pool.stop();
            (work, bytes)
        };
        let one = pages_after(1);
        redone += one.0 .0;
        for threads in [2, 3, 8] {
            assert!(pages_after(threads) == one, "seed {seed}, {threads} threads");
        }
    }
    assert!(redone > 1000, "redo had work to do: {redone} records");
}
