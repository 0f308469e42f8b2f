//! The log manager's unit tests: the WAL-rule gate and its independent
//! check, durability per partition, the unresolved queue's bound, RFA,
//! chained pipelined commits and the GSN protocol.

use super::unresolved::UNRESOLVED_TRIM_AT;
use super::*;
use crate::btree::BTree;
use crate::buffer::{page, BufferPool, PageWritePolicy, PoolConfig};
use crate::ids::{Gsn, LogPos, Tid};
use crate::io::{OpenMode, SimStorage};
use crate::persist::{CommitView, SessionLog};

fn setup(protocol: CommitProtocol) -> (Arc<BufferPool>, Arc<Wal>, BTree, BTree) {
    setup_on(&SimStorage::new(9), protocol)
}

fn setup_on(
    sim: &SimStorage,
    protocol: CommitProtocol,
) -> (Arc<BufferPool>, Arc<Wal>, BTree, BTree) {
    let sim = sim.clone();
    sim.create_dir_all(Path::new("/db")).unwrap();
    let file = sim
        .open(Path::new("/db/data"), OpenMode::CreateIfMissing)
        .unwrap();
    let pool = BufferPool::start(
        PoolConfig {
            page_size: 4096,
            frames: 64,
        },
        file,
        1,
        Vec::new(),
    )
    .unwrap();
    let wal = Wal::new(Arc::new(sim), Path::new("/db/wal"), protocol, Vec::new(), Gsn::ZERO).unwrap();
    pool.set_page_write_policy(PageWritePolicy::StealBehindGate(wal.clone()));
    let mut sys = wal.session_log(100).unwrap();
    sys.on_begin();
    let a = BTree::create(&pool, &sys).unwrap();
    let b = BTree::create(&pool, &sys).unwrap();
    sys.on_commit(&CommitView::without_writes(Tid::new(1), &[])).unwrap();
    sys.wait_durable().unwrap();
    (pool, wal, a, b)
}

struct PanickingGate;

impl FlushGate for PanickingGate {
    fn ensure_durable(&self, _gsn: Gsn) -> Result<()> {
        panic!("gate bug");
    }
    fn is_durable_at(&self, _partition: u32, _end: LogPos) -> bool {
        true
    }
}

/// A panic while writing a batch (here in the gate) once left the
/// frames in writeback, and every later checkpoint increment waited for
/// them for good (a hang of `close` seen once in the crash tests had
/// exactly that shape). The pool is poisoned instead and the pages
/// stay dirty.
#[test]
fn a_panic_while_writing_pages_poisons_the_pool_instead_of_leaving_them_in_writeback() {
    let (pool, wal, a, _) = setup(CommitProtocol::Rfa);
    let mut s1 = wal.session_log(1).unwrap();
    s1.on_begin();
    a.insert(&pool, &s1, b"k", Tid::new(1 << 16 | 1), b"v", None).unwrap();
    commit(&mut s1, Tid::new(1 << 16 | 1), &[]);
    pool.set_page_write_policy(PageWritePolicy::StealBehindGate(Arc::new(PanickingGate)));
    let flush = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.flush_all()));
    assert!(flush.is_err(), "the gate's panic goes on");
    assert!(pool.check_healthy().is_err(), "poisoned");
    pool.set_page_write_policy(PageWritePolicy::StealBehindGate(wal.clone()));
    assert!(pool.checkpoint_shard(0, 1).is_err(), "refused, not waiting");
    assert!(pool.stats().dirty_pages > 0, "the pages are dirty again");
}

/// A gate that lets every write through and vouches for nothing: the
/// pool's own WAL-rule assertion must stop the write.
struct BrokenGate;

impl FlushGate for BrokenGate {
    fn ensure_durable(&self, _gsn: Gsn) -> Result<()> {
        Ok(())
    }
    fn is_durable_at(&self, _partition: u32, _end: LogPos) -> bool {
        false
    }
}

#[test]
fn writing_a_page_whose_last_record_is_not_durable_trips_the_wal_rule_check() {
    let (pool, wal, a, _) = setup(CommitProtocol::Rfa);
    let s1 = wal.session_log(1).unwrap();
    s1.state.borrow_mut().txn = 5;
    a.insert(&pool, &s1, b"k", Tid::new(5), b"v", None).unwrap();
    // The real gate flushes first: nothing to report.
    pool.flush_all().unwrap();
    assert_eq!(pool.stats().wal_rule_violations, 0);
    a.insert(&pool, &s1, b"k2", Tid::new(5), b"v", None).unwrap();
    pool.set_page_write_policy(PageWritePolicy::StealBehindGate(Arc::new(BrokenGate)));
    let err = pool.flush_all().unwrap_err();
    assert!(err.to_string().contains("WAL rule violated"), "{err}");
    assert_eq!(pool.stats().wal_rule_violations, 1);
    // Refused and poisoned, not stuck: nothing more is written.
    let written = pool.stats().pages_written_by_flush;
    assert!(pool.flush_all().is_err());
    assert_eq!(pool.stats().pages_written_by_flush, written);
}

#[test]
fn the_wal_reports_durability_per_partition_position() {
    let (pool, wal, a, _) = setup(CommitProtocol::Rfa);
    let mut s1 = wal.session_log(1).unwrap();
    s1.on_begin();
    a.insert(&pool, &s1, b"k", Tid::new(5), b"v", None).unwrap();
    let end = wal.partition(1).unwrap().appended();
    commit(&mut s1, Tid::new(5), &[]);
    assert!(wal.is_durable_at(1, end));
    let written = wal.partition(1).unwrap().appended();
    assert!(
        !wal.is_durable_at(1, written.advance(8)),
        "beyond what was written"
    );
    assert!(
        !wal.is_durable_at(77, LogPos::ZERO),
        "a partition that does not exist"
    );
    // The real gate makes the page's record durable before the write.
    pool.flush_all().unwrap();
}

/// Nothing here runs the checkpointer's scan (as under `--checkpoint
/// none`): the session's queue of transactions recovery might undo
/// must stay bounded. It used to keep one entry, with its ticket, per
/// transaction ever logged.
#[test]
fn a_session_drops_its_resolved_transactions_without_the_checkpointer() {
    let (pool, wal, a, _) = setup(CommitProtocol::RfaGroup);
    let mut s1 = wal.session_log(1).unwrap();
    let txns = 3 * UNRESOLVED_TRIM_AT as u64;
    for i in 1..=txns {
        s1.on_begin();
        a.insert(&pool, &s1, &i.to_be_bytes(), Tid::new(i << 16 | 1), b"v", None)
            .unwrap();
        commit(&mut s1, Tid::new(i << 16 | 1), &[]);
        let queued = s1.unresolved.lock().len();
        assert!(queued <= UNRESOLVED_TRIM_AT, "{queued} transactions queued");
    }
    assert_eq!(wal.oldest_unresolved_gsn(), Gsn::MAX, "all resolved");
}

fn commit(log: &mut WalSessionLog, tid: Tid, observed: &[Tid]) {
    log.on_commit(&CommitView::without_writes(tid, observed))
        .unwrap();
    log.wait_durable().unwrap();
}

#[test]
fn rfa_skips_remote_flushes_on_disjoint_pages_and_not_on_shared_ones() {
    for protocol in [CommitProtocol::Rfa, CommitProtocol::RfaGroup] {
        let (pool, wal, a, b) = setup(protocol);
        let mut s1 = wal.session_log(1).unwrap();
        let mut s2 = wal.session_log(2).unwrap();
        // Disjoint pages: each session writes its own tree (own leaf).
        for i in 0..20u64 {
            s1.on_begin();
            a.insert(&pool, &s1, &i.to_be_bytes(), Tid::new((i << 16) | 1), b"x", None)
                .unwrap();
            commit(&mut s1, Tid::new((i << 16) | 1), &[]);
            s2.on_begin();
            b.insert(&pool, &s2, &i.to_be_bytes(), Tid::new((i << 16) | 2), b"y", None)
                .unwrap();
            commit(&mut s2, Tid::new((i << 16) | 2), &[]);
        }
        let disjoint = wal.stats().remote_flush_commits;
        assert_eq!(
            disjoint, 0,
            "{protocol:?}: disjoint pages need no remote flush"
        );
        // Shared page, unflushed: s1 writes without waiting for
        // durability, s2 writes the same leaf at once.
        s1.on_begin();
        a.insert(&pool, &s1, b"shared-1", Tid::new(999 << 16 | 1), b"x", None)
            .unwrap();
        s1.on_commit(&CommitView::without_writes(Tid::new(999 << 16 | 1), &[]))
            .unwrap();
        s2.on_begin();
        a.insert(&pool, &s2, b"shared-2", Tid::new(1000 << 16 | 2), b"y", None)
            .unwrap();
        commit(&mut s2, Tid::new(1000 << 16 | 2), &[]);
        s1.wait_durable().unwrap();
        // Either s1's record was already durable when s2 started (no
        // remote flush needed) or s2 flushed remotely; with the
        // partition writer idle between them the latter is expected
        // only if s1 was not yet durable. Force the case: read
        // dependency on a commit that is not durable.
        // A read of a commit its partition has not made durable: a TID
        // of s1 above anything s1 committed durably (deterministic,
        // unlike racing s1's writer).
        let before = wal.stats().remote_flush_commits;
        let unflushed = Tid::new(1u64 << 40 | 1);
        assert!(wal.partition(1).unwrap().durable_commit_tid() < unflushed);
        s2.on_begin();
        a.insert(&pool, &s2, b"shared-4", Tid::new(1002 << 16 | 2), b"y", None)
            .unwrap();
        s2.on_commit(&CommitView::without_writes(Tid::new(1002 << 16 | 2), &[unflushed]))
            .unwrap();
        assert_eq!(
            wal.stats().remote_flush_commits,
            before + 1,
            "{protocol:?}: a read of an unflushed commit is a remote dependency"
        );
        s2.wait_durable().unwrap();
        pool.stop();
        wal.shutdown().unwrap();
    }
}

/// A page read from the data file carries only durable changes (the
/// WAL rule held when it was written), so writing it is no remote
/// dependency, whatever its GSN; before, its unknown writer counted as
/// remote and every page evicted and read back made a commit remote.
#[test]
fn a_page_read_from_disk_is_no_remote_dependency() {
    let (pool, wal, a, b) = setup(CommitProtocol::RfaGroup);
    let s1 = wal.session_log(1).unwrap();
    // s1 logs without committing: GSN_flushed stays low.
    s1.state.borrow_mut().txn = 7;
    b.insert(&pool, &s1, b"pending", Tid::new(7), b"x", None).unwrap();
    let mut s2 = wal.session_log(2).unwrap();
    let mut write_as = |last_writer: u32, key: &[u8], tid: Tid| {
        pool.exclusive(a.root())
            .unwrap()
            .set_last_writer(last_writer, LogPos::ZERO);
        s2.on_begin();
        a.insert(&pool, &s2, key, tid, b"y", None).unwrap();
        commit(&mut s2, tid, &[]);
        wal.stats().remote_flush_commits
    };
    assert_eq!(
        write_as(crate::buffer::WRITER_READ_FROM_DISK, b"k1", Tid::new(1 << 16 | 2)),
        0
    );
    // The same page last written by another partition is remote.
    assert_eq!(write_as(100, b"k2", Tid::new(2 << 16 | 2)), 1);
}

fn positions(t: &CommitTicket) -> Vec<(u32, LogPos)> {
    t.targets().map(|(p, pos)| (p.id(), pos)).collect()
}

/// Found by the TPC-C run (remote-flush fraction 0.93 with a warehouse
/// per worker): a pipelined commit behind an unresolved remote one took
/// the other partitions' current ends as its own dependencies, so with
/// commits in flight a session stayed remote for good.
#[test]
fn a_commit_chained_behind_a_remote_one_waits_for_its_positions_only() {
    let (pool, wal, a, b) = setup(CommitProtocol::RfaGroup);
    let mut s1 = wal.session_log(1).unwrap();
    let mut s2 = wal.session_log(2).unwrap();
    let mut chained_seen = 0;
    for r in 0..40u64 {
        // s1 changes a leaf of `a` and keeps logging, uncommitted (so
        // nothing asks its writer to flush).
        s1.on_begin();
        a.insert(&pool, &s1, &[1, r as u8], Tid::new((r << 16) | 1), b"x", None)
            .unwrap();
        // T1 on s2 writes the same leaf: a remote dependency.
        s2.on_begin();
        a.insert(&pool, &s2, &[2, r as u8], Tid::new((r << 16) | 2), b"y", None)
            .unwrap();
        s2.on_commit(&CommitView::without_writes(Tid::new((r << 16) | 2), &[]))
            .unwrap();
        let t1 = s2.take_ticket().unwrap();
        a.insert(&pool, &s1, &[3, r as u8], Tid::new((r << 16) | 1), b"x", None)
            .unwrap();
        // T2 on s2 touches only its own tree.
        let chained_before = wal.stats().chained_commits;
        s2.on_begin();
        b.insert(&pool, &s2, &[4, r as u8], Tid::new((r << 17) | 2), b"z", None)
            .unwrap();
        s2.on_commit(&CommitView::without_writes(Tid::new((r << 17) | 2), &[]))
            .unwrap();
        let t2 = s2.take_ticket().unwrap();
        if wal.stats().chained_commits > chained_before {
            chained_seen += 1;
            assert!(t2.remote_tid.is_some(), "published by its waiter");
            assert_eq!(
                positions(&t2)[1..],
                positions(&t1)[1..],
                "a chained commit waits for its predecessor's positions, not the current ends"
            );
            let on_s1 = positions(&t2).into_iter().find(|(id, _)| *id == 1).unwrap();
            assert!(on_s1.1 < wal.partition(1).unwrap().appended());
        }
        s1.on_commit(&CommitView::without_writes(Tid::new((r << 16) | 1), &[]))
            .unwrap();
        s1.wait_durable().unwrap();
        t1.wait().unwrap();
        t2.wait().unwrap();
    }
    assert!(
        chained_seen > 0,
        "the writer flushed s1 first in every round"
    );
    // Once the remote predecessor is durable the chain ends: a commit
    // that needs nothing remote is local again.
    let (remote, chained) = (
        wal.stats().remote_flush_commits,
        wal.stats().chained_commits,
    );
    s2.on_begin();
    b.insert(&pool, &s2, b"local", Tid::new(1 << 40 | 2), b"z", None)
        .unwrap();
    commit(&mut s2, Tid::new(1 << 40 | 2), &[]);
    assert_eq!(wal.stats().remote_flush_commits, remote);
    assert_eq!(wal.stats().chained_commits, chained);
    pool.stop();
    wal.shutdown().unwrap();
}

#[test]
fn page_gsns_follow_the_gsn_protocol() {
    let (pool, wal, a, _) = setup(CommitProtocol::FlushAll);
    let mut s1 = wal.session_log(1).unwrap();
    let mut s2 = wal.session_log(2).unwrap();
    let mut last = Gsn::ZERO;
    for i in 0..50u64 {
        let (s, slot) = if i % 2 == 0 {
            (&mut s1, 1)
        } else {
            (&mut s2, 2)
        };
        s.on_begin();
        a.insert(&pool, s, &i.to_be_bytes(), Tid::new((i << 16) | slot), b"v", None)
            .unwrap();
        let gsn = page::page_gsn(pool.shared(a.root()).unwrap().data());
        assert!(
            gsn > last,
            "page GSN rises with every record ({gsn} after {last})"
        );
        last = gsn;
        commit(s, Tid::new((i << 16) | slot), &[]);
    }
    assert_eq!(wal.stats().commits, 51);
    assert!(wal.flushed_gsn() >= last);
    pool.stop();
    wal.shutdown().unwrap();
}

/// Found by the crash test's toggles (seed 169, `rfa`): a transaction that
/// read a key as absent, or inserted it, depends on the commit that
/// deleted it, but a delete leaves no record whose TID names the deleter,
/// and the page check misses it once the delete record is durable without
/// its commit record (or the reader's own later write to the page hides
/// the deleter as last writer). The RFA check now takes the delete mark
/// the deleter left on the key's stripe (`SessionLog::delete_mark`): a
/// mark above GSN_flushed is a remote dependency, for a writing commit
/// and for a read-only one.
#[test]
fn a_key_deleted_by_an_unflushed_commit_is_a_remote_dependency() {
    let (pool, wal, a, b) = setup(CommitProtocol::Rfa);
    let s1 = wal.session_log(1).unwrap();
    // s1, the "deleter", logs without its partition becoming durable; its
    // mark is taken after its records, as a deleting commit's is.
    s1.state.borrow_mut().txn = 7;
    let unflushed_delete = |key: &[u8]| {
        b.insert(&pool, &s1, key, Tid::new(7), b"x", None).unwrap();
        let mark = s1.delete_mark();
        assert!(mark > wal.flushed_gsn().get(), "the mark is above GSN_flushed");
        mark
    };
    let mut s2 = wal.session_log(2).unwrap();
    let insert_with = |s2: &mut WalSessionLog, key: &[u8], tid: Tid, absent_mark: u64| {
        s2.on_begin();
        a.insert(&pool, &*s2, key, tid, b"y", None).unwrap();
        s2.on_commit(&CommitView::without_writes(tid, &[]).with_absent_mark(absent_mark))
            .unwrap();
        s2.wait_durable().unwrap();
        wal.stats().remote_flush_commits
    };
    let mark = unflushed_delete(b"d1");
    // No mark: a page of its own (last written by the durable system
    // slot) needs no remote flush.
    assert_eq!(insert_with(&mut s2, b"k1", Tid::new(1 << 16 | 2), 0), 0);
    // Read-only: no record of its own, but it waits for the deleter.
    s2.on_begin();
    s2.on_commit(&CommitView::without_writes(Tid::ZERO, &[]).with_absent_mark(mark))
        .unwrap();
    assert!(s2.pending.is_some(), "a read-only commit waits for the deleter");
    s2.wait_durable().unwrap();
    assert!(mark <= wal.flushed_gsn().get(), "the wait flushed the deleter");
    // A writing commit whose absent key an unflushed commit deleted.
    let mark = unflushed_delete(b"d2");
    assert_eq!(
        insert_with(&mut s2, b"k2", Tid::new(2 << 16 | 2), mark),
        1,
        "an insert of a key an unflushed commit deleted is a remote dependency"
    );
    // Once the deleter is durable, its mark is no dependency.
    assert!(mark <= wal.flushed_gsn().get());
    assert_eq!(insert_with(&mut s2, b"k3", Tid::new(3 << 16 | 2), mark), 1);
    pool.stop();
    wal.shutdown().unwrap();
}
