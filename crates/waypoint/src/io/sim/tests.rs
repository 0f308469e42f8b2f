//! Tests of the simulated disk: crash policies, torn writes, names,
//! fenced instances, faults, space limits, and a model check of images.

use super::*;
use proptest::prelude::*;
use crate::error::Error;
use crate::io::{OpenMode, Storage, StorageFile};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn p(s: &str) -> &Path {
    Path::new(s)
}

fn code(result: Result<impl std::fmt::Debug>) -> i32 {
    match result {
        Err(e) => e.raw_os_error().unwrap_or(-1),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

/// A disk with directory `/db` made durable.
fn disk(seed: u64) -> SimStorage {
    let s = SimStorage::new(seed);
    s.create_dir_all(p("/db")).unwrap();
    s.sync_dir(p("/")).unwrap();
    s
}

/// `/db/f` durably created (empty), then `data` written and not synced.
fn unsynced(seed: u64, data: &[u8]) -> (SimStorage, Arc<dyn StorageFile>) {
    let s = disk(seed);
    let f = s.open(p("/db/f"), OpenMode::CreateNew).unwrap();
    s.sync_dir(p("/db")).unwrap();
    f.write_at(data, 0).unwrap();
    (s, f)
}

#[test]
fn unsynced_write_lost_on_drop_all_kept_on_keep_all() {
    let (s, _f) = unsynced(1, b"hello");
    s.crash(CrashPolicy::DropAll);
    assert_eq!(s.read_current(p("/db/f")), Some(vec![]));
    let (s, _f) = unsynced(1, b"hello");
    s.crash(CrashPolicy::KeepAll);
    assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"hello"[..]));
    // `Random` at its extremes behaves like the fixed policies.
    let (s, _f) = unsynced(1, b"hello");
    s.crash(CrashPolicy::Random {
        keep: 0.0,
        tear: true,
    });
    assert_eq!(s.read_current(p("/db/f")), Some(vec![]));
    let (s, _f) = unsynced(1, b"hello");
    s.crash(CrashPolicy::Random {
        keep: 1.0,
        tear: false,
    });
    assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"hello"[..]));
}

#[test]
fn synced_write_survives_every_policy() {
    let policies = [
        CrashPolicy::DropAll,
        CrashPolicy::KeepAll,
        CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        },
    ];
    for (seed, policy) in policies.into_iter().enumerate() {
        let (s, f) = unsynced(seed as u64, &[7; 3000]);
        f.sync_data().unwrap();
        f.write_at(&[9; 100], 3000).unwrap();
        s.crash(policy);
        let image = s.read_durable(p("/db/f")).unwrap();
        assert_eq!(image[..3000], [7; 3000][..], "{policy:?}");
    }
}

#[test]
fn torn_write_keeps_whole_sectors_only() {
    let mut torn = 0;
    for seed in 0..64 {
        let s = disk(seed);
        s.set_sector_size(Some(512));
        let f = s.open(p("/db/f"), OpenMode::CreateNew).unwrap();
        s.sync_dir(p("/db")).unwrap();
        f.write_at(&[0xAA; 8192], 0).unwrap();
        f.sync_data().unwrap();
        // Unaligned on purpose: the write covers parts of sectors 0 and 10.
        let write = 300..5300;
        f.write_at(&[0xBB; 5000], write.start as u64).unwrap();
        s.crash(CrashPolicy::Random {
            keep: 1.0,
            tear: true,
        });
        let image = s.read_durable(p("/db/f")).unwrap();
        assert_eq!(image.len(), 8192);
        let mut new_sectors = 0;
        for i in 0..image.len() / 512 {
            let range = i * 512..(i + 1) * 512;
            let written: Vec<u8> = range
                .clone()
                .filter(|at| write.contains(at))
                .map(|at| image[at])
                .collect();
            let untouched = range.filter(|at| !write.contains(at));
            assert!(untouched.into_iter().all(|at| image[at] == 0xAA));
            let all_new = written.iter().all(|&b| b == 0xBB);
            let all_old = written.iter().all(|&b| b == 0xAA);
            assert!(all_new || all_old, "seed {seed}: sector {i} torn inside");
            new_sectors += usize::from(!written.is_empty() && all_new);
        }
        torn += usize::from(new_sectors > 0 && new_sectors < 11);
    }
    assert!(torn > 0, "no write was ever torn");
}

fn crash_image(seed: u64) -> Vec<u8> {
    let s = disk(seed);
    let f = s.open(p("/db/f"), OpenMode::CreateNew).unwrap();
    s.sync_dir(p("/db")).unwrap();
    for i in 0..32u8 {
        f.write_at(&[i; 700], u64::from(i) * 600).unwrap();
    }
    s.crash(CrashPolicy::Random {
        keep: 0.5,
        tear: true,
    });
    s.read_durable(p("/db/f")).unwrap()
}

#[test]
fn same_seed_same_crash_image_different_seeds_differ() {
    for seed in 0..4 {
        assert_eq!(crash_image(seed), crash_image(seed));
    }
    let distinct: BTreeSet<Vec<u8>> = (0..8).map(crash_image).collect();
    assert!(distinct.len() > 1);
}

#[test]
fn rename_and_create_durable_only_after_sync_dir() {
    for sync in [false, true] {
        let s = disk(3);
        let f = s.open(p("/db/a"), OpenMode::CreateNew).unwrap();
        f.write_at(b"data", 0).unwrap();
        f.sync_data().unwrap();
        let fresh = s.open(p("/db/new"), OpenMode::CreateNew).unwrap();
        fresh.sync_data().unwrap();
        s.sync_dir(p("/db")).unwrap();
        s.remove(p("/db/new")).unwrap();
        s.open(p("/db/other"), OpenMode::CreateNew).unwrap();
        s.rename(p("/db/a"), p("/db/b")).unwrap();
        assert_eq!(s.list_dir(p("/db")).unwrap(), [p("/db/b"), p("/db/other")]);
        if sync {
            s.sync_dir(p("/db")).unwrap();
        }
        s.crash(CrashPolicy::DropAll);
        let expect: &[&Path] = if sync {
            &[p("/db/b"), p("/db/other")]
        } else {
            &[p("/db/a"), p("/db/new")]
        };
        assert_eq!(s.list_dir(p("/db")).unwrap(), expect);
        let name = if sync { "/db/b" } else { "/db/a" };
        assert_eq!(s.read_current(p(name)).as_deref(), Some(&b"data"[..]));
    }
}

#[test]
fn keep_all_keeps_unsynced_names_and_random_keeps_a_prefix() {
    let s = SimStorage::new(4);
    s.create_dir_all(p("d/e")).unwrap();
    s.open(p("d/e/x"), OpenMode::CreateNew).unwrap();
    s.rename(p("d/e/x"), p("d/y")).unwrap();
    s.crash(CrashPolicy::KeepAll);
    assert_eq!(s.list_dir(p("d")).unwrap(), [p("d/e"), p("d/y")]);
    assert!(s.list_dir(p("d/e")).unwrap().is_empty());
    let mut outcomes = BTreeSet::new();
    for seed in 0..32 {
        let s = SimStorage::new(seed);
        s.create_dir_all(p("/a")).unwrap();
        s.create_dir_all(p("/b")).unwrap();
        s.open(p("/a/f"), OpenMode::CreateNew).unwrap();
        s.sync_dir(p("/a")).unwrap();
        s.sync_dir(p("/")).unwrap();
        s.rename(p("/a/f"), p("/b/f")).unwrap();
        s.open(p("/a/g"), OpenMode::CreateNew).unwrap();
        s.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: false,
        });
        let (a, b, g) = (
            s.exists(p("/a/f")),
            s.exists(p("/b/f")),
            s.exists(p("/a/g")),
        );
        assert!(a != b, "a cross-directory rename is atomic");
        assert!(!g || b, "a later op survives only with the earlier ones");
        outcomes.insert((b, g));
    }
    assert_eq!(outcomes.len(), 3);
}

#[test]
fn handle_from_before_crash_fails_with_eio_and_is_not_counted() {
    let (s, f) = unsynced(5, b"x");
    s.crash(CrashPolicy::KeepAll);
    let ops = s.op_count();
    assert_eq!(code(f.write_at(b"y", 0)), libc::EIO);
    let mut buf = [0];
    assert_eq!(code(f.read_at(&mut buf, 0)), libc::EIO);
    assert_eq!(code(f.sync_data()), libc::EIO);
    assert_eq!(code(f.len()), libc::EIO);
    assert_eq!(code(f.set_len(0)), libc::EIO);
    assert_eq!(s.op_count(), ops);
    assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"x"[..]));
    let g = s.open(p("/db/f"), OpenMode::Existing).unwrap();
    g.write_at(b"z", 0).unwrap();
}

/// A clone handed to an engine instance dies with it: after the crash,
/// no call through it (remove, rename, open, mkdir, sync, list, exists)
/// changes, reveals or counts anything in the next image, exactly as
/// for the instance's file handles. Before this, a crash test's
/// forgotten instance kept running its checkpointer, which pruned a
/// log segment of the recovered image between recovery's listing and
/// its reopening of the segment ("open failed on .../p00000/….wal:
/// No such file or directory", about 1 run in 8 of
/// `crashes_inside_log_appends_and_pruning_lose_no_acknowledged_update`):
/// a state no power loss can produce, since a dead process runs no code.
#[test]
fn storage_of_a_crashed_instance_cannot_touch_the_next_image() {
    let s = disk(14);
    let f = s.open(p("/db/seg"), OpenMode::CreateNew).unwrap();
    f.write_at(b"log", 0).unwrap();
    f.sync_data().unwrap();
    s.sync_dir(p("/db")).unwrap();
    let dead = s.clone();
    let grandchild = dead.clone();
    dead.open(p("/db/seg"), OpenMode::Existing).unwrap();
    s.crash(CrashPolicy::DropAll);

    let ops = s.op_count();
    let segment = s.list_dir(p("/db")).unwrap();
    assert_eq!(segment, [p("/db/seg")]);
    assert_eq!(code(dead.remove(p("/db/seg"))), libc::EIO);
    assert_eq!(code(dead.rename(p("/db/seg"), p("/db/x"))), libc::EIO);
    assert_eq!(code(dead.open(p("/db/seg"), OpenMode::Existing)), libc::EIO);
    assert_eq!(
        code(dead.open(p("/db/new"), OpenMode::CreateNew)),
        libc::EIO
    );
    assert_eq!(code(dead.create_dir_all(p("/db/d"))), libc::EIO);
    assert_eq!(code(dead.sync_dir(p("/db"))), libc::EIO);
    assert_eq!(code(dead.list_dir(p("/db"))), libc::EIO);
    assert!(!dead.exists(p("/db/seg")));
    assert_eq!(code(grandchild.remove(p("/db/seg"))), libc::EIO);
    assert_eq!(code(dead.clone().remove(p("/db/seg"))), libc::EIO);
    assert_eq!(s.op_count(), ops + 1, "only the live listing was counted");

    // The listed segment is still there for the next instance.
    let next = s.clone();
    let g = next.open(&segment[0], OpenMode::Existing).unwrap();
    let mut buf = [0; 3];
    g.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"log");
    assert_eq!(next.list_dir(p("/db")).unwrap(), [p("/db/seg")]);
    next.remove(p("/db/seg")).unwrap();
    assert!(!s.exists(p("/db/seg")));
}

#[test]
fn eio_fires_at_its_op_only_and_failed_sync_keeps_writes_pending() {
    let (s, f) = unsynced(6, b"abc");
    let at = s.op_count() + 2;
    s.inject(Fault::at(at, FaultKind::Eio));
    f.len().unwrap();
    let err = f.sync_data().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(matches!(
        err,
        Error::Io {
            op: IoOp::SyncData,
            ..
        }
    ));
    assert_eq!(s.read_durable(p("/db/f")), Some(vec![]));
    assert_eq!(s.op_count(), at);
    f.len().unwrap();
    // Path filter: a fault for another file waits for an op on that file.
    s.inject(Fault::at(0, FaultKind::Eio).on_path("other"));
    f.len().unwrap();
    let g = s.open(p("/db/other"), OpenMode::CreateIfMissing);
    assert_eq!(code(g), libc::EIO);
    s.open(p("/db/other"), OpenMode::CreateIfMissing).unwrap();
    f.sync_data().unwrap();
    s.crash(CrashPolicy::DropAll);
    assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"abc"[..]));
}

#[test]
fn enospc_fault_fails_a_write_and_changes_nothing() {
    let (s, f) = unsynced(7, b"abc");
    s.inject(Fault::at(s.op_count() + 1, FaultKind::Enospc));
    // Not eligible: a read passes and the fault waits for the write.
    f.read_at(&mut [0; 3], 0).unwrap();
    let err = f.write_at(b"XYZW", 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert!(matches!(
        err,
        Error::Io {
            op: IoOp::Write,
            offset: Some(0),
            ..
        }
    ));
    assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"abc"[..]));
    f.write_at(b"XYZW", 0).unwrap();
}

#[test]
fn short_write_applies_a_strict_prefix_then_fails() {
    let (s, f) = unsynced(8, &[1; 10]);
    s.inject(Fault::at(s.op_count() + 1, FaultKind::ShortWrite));
    assert_eq!(code(f.write_at(&[2; 1000], 0)), libc::EIO);
    let image = s.read_current(p("/db/f")).unwrap();
    let prefix = image.iter().take_while(|&&b| b == 2).count();
    assert!(prefix < 1000);
    assert_eq!(image.len(), prefix.max(10));
    assert!(image[prefix..].iter().all(|&b| b == 1));
    f.write_at(&[3; 4], 0).unwrap();
}

/// The engine stand-in: a few files written and synced.
fn workload(s: &SimStorage) -> Result<()> {
    s.create_dir_all(p("/w"))?;
    for i in 0..3u8 {
        let f = s.open(&PathBuf::from(format!("/w/{i}")), OpenMode::CreateNew)?;
        f.write_at(&[i; 100], 0)?;
        f.sync_data()?;
        s.sync_dir(p("/w"))?;
    }
    Ok(())
}

#[test]
fn freeze_sticks_until_crash() {
    let probe = SimStorage::new(9);
    workload(&probe).unwrap();
    let total = probe.op_count();
    for at in 1..=total {
        let s = SimStorage::new(9);
        s.inject(Fault::at(at, FaultKind::Freeze));
        assert!(workload(&s).is_err());
        assert_eq!(s.op_count(), at, "the workload stops at the frozen op");
        assert!(s.is_frozen());
        assert_eq!(code(s.list_dir(p("/"))), libc::EIO);
        assert_eq!(code(s.create_dir_all(p("/z"))), libc::EIO);
        s.crash(CrashPolicy::DropAll);
        assert!(!s.is_frozen());
        s.create_dir_all(p("/z")).unwrap();
    }
}

#[test]
fn space_limit_enospc_until_a_file_is_removed() {
    let s = disk(10);
    s.set_space_limit(Some(1000));
    let a = s.open(p("/db/a"), OpenMode::CreateNew).unwrap();
    a.write_at(&[1; 600], 0).unwrap();
    let b = s.open(p("/db/b"), OpenMode::CreateNew).unwrap();
    assert_eq!(code(b.write_at(&[2; 500], 0)), libc::ENOSPC);
    assert_eq!(code(b.set_len(500)), libc::ENOSPC);
    assert_eq!(b.len().unwrap(), 0);
    a.write_at(&[3; 600], 0).unwrap(); // overwriting in place needs no space
    drop(a);
    s.remove(p("/db/a")).unwrap();
    b.write_at(&[2; 500], 0).unwrap();
    s.set_space_limit(None);
    b.write_at(&[2; 5000], 0).unwrap();
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let s = SimStorage::new(11);
    assert_eq!(
        code(s.open(p("/nodir/f"), OpenMode::CreateIfMissing)),
        libc::ENOENT
    );
    assert_eq!(code(s.open(p("rel/f"), OpenMode::CreateNew)), libc::ENOENT);
    s.create_dir_all(p("rel")).unwrap();
    let f = s.open(p("rel/f"), OpenMode::CreateNew).unwrap();
    assert_eq!(code(s.open(p("rel/f"), OpenMode::CreateNew)), libc::EEXIST);
    assert_eq!(code(s.open(p("rel/g"), OpenMode::Existing)), libc::ENOENT);
    assert_eq!(code(s.open(p("rel"), OpenMode::Existing)), libc::EISDIR);
    assert_eq!(code(s.open(p("/"), OpenMode::Existing)), libc::EISDIR);
    assert_eq!(
        code(s.open(p("rel/f/x"), OpenMode::CreateNew)),
        libc::ENOTDIR
    );
    assert_eq!(code(s.create_dir_all(p("rel/f"))), libc::EEXIST);
    assert_eq!(code(s.rename(p("rel"), p("rel/sub"))), libc::EINVAL);
    assert_eq!(code(s.remove(p("rel/nope"))), libc::ENOENT);
    assert_eq!(code(s.sync_dir(p("rel/f"))), libc::ENOTDIR);
    assert_eq!(code(f.write_at(b"x", u64::MAX)), libc::EFBIG);
    assert_eq!(code(f.set_len(u64::MAX)), libc::EFBIG);
    f.write_at(b"abc", 0).unwrap();
    let err = f.read_at(&mut [0; 4], 0).unwrap_err();
    match err {
        Error::Io {
            op: IoOp::Read,
            cause,
            offset: Some(0),
            ..
        } => {
            assert_eq!(cause.kind(), std::io::ErrorKind::UnexpectedEof)
        }
        other => panic!("{other:?}"),
    }
    assert!(f.read_at(&mut [0; 1], u64::MAX).is_err());
    assert!(s.exists(p("./rel/../rel/f")));
    assert!(!s.exists(p("/rel/f")), "absolute and relative roots differ");
    assert!(s.corrupt(p("rel/f"), 99, 1).is_err());
}

#[test]
fn corrupt_flips_bits_in_both_images_and_stats_count() {
    let (s, f) = unsynced(12, b"abc");
    f.sync_data().unwrap();
    s.corrupt(p("/db/f"), 1, 0x01).unwrap();
    assert_eq!(s.read_durable(p("/db/f")).as_deref(), Some(&b"acc"[..]));
    let mut buf = [0; 3];
    f.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"acc");
    let st = s.stats();
    assert_eq!((st.writes, st.bytes_written, st.data_syncs), (1, 3, 1));
    assert_eq!((st.reads, st.bytes_read, st.dir_syncs), (1, 3, 2));
}

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, len: usize, byte: u8 },
    SetLen(u64),
    Sync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4096u64, 0..700usize, any::<u8>())
            .prop_map(|(offset, len, byte)| Op::Write { offset, len, byte }),
        1 => (0..5000u64).prop_map(Op::SetLen),
        2 => Just(Op::Sync),
    ]
}

/// Runs `ops` on a fresh disk; returns it and the model's (current, synced).
fn run(ops: &[Op]) -> (SimStorage, Vec<u8>, Vec<u8>) {
    let (s, f) = unsynced(13, b"");
    let (mut current, mut synced) = (Vec::new(), Vec::new());
    for op in ops {
        match *op {
            Op::Write { offset, len, byte } => {
                f.write_at(&vec![byte; len], offset).unwrap();
                let end = offset as usize + len;
                if len > 0 {
                    current.resize(current.len().max(end), 0);
                    current[offset as usize..end].fill(byte);
                }
            }
            Op::SetLen(len) => {
                f.set_len(len).unwrap();
                current.resize(len as usize, 0);
            }
            Op::Sync => {
                f.sync_data().unwrap();
                synced = current.clone();
            }
        }
    }
    (s, current, synced)
}

proptest! {
    #[test]
    fn keep_all_is_current_image_and_drop_all_is_last_synced(
        ops in proptest::collection::vec(op(), 0..40)
    ) {
        let (s, current, _) = run(&ops);
        prop_assert_eq!(s.read_current(p("/db/f")), Some(current.clone()));
        s.crash(CrashPolicy::KeepAll);
        prop_assert_eq!(s.read_durable(p("/db/f")), Some(current));
        let (s, _, synced) = run(&ops);
        s.crash(CrashPolicy::DropAll);
        prop_assert_eq!(s.read_current(p("/db/f")), Some(synced));
    }
}
