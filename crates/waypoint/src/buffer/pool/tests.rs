//! The pool's unit tests: page-id limits, budgets, frame hints, the
//! checkpoint increment's latch handling, and the page-write policies.

use super::frame::NO_PAGE;
use super::writeback::{WritebackBatch, WRITEBACK_BATCH_PAGES};
use super::*;
use crate::buffer::page::{self, PageKind};
use crate::ids::{Gsn, LogPos};
use crate::io::{OpenMode, SimStorage, Storage};
use std::path::Path;

/// A pool of `frames` 4 KiB frames over `/db/data` on a simulated disk.
fn sim_pool(frames: usize) -> Arc<BufferPool> {
    sim_pool_from(frames, 1)
}

/// The same, with page ids handed out from `next_page_id`.
fn sim_pool_from(frames: usize, next_page_id: PageId) -> Arc<BufferPool> {
    let sim = SimStorage::new(1);
    sim.create_dir_all(Path::new("/db")).unwrap();
    pool_on(&sim, frames, next_page_id)
}

/// A pool of `frames` 4 KiB frames over `/db/data` of `sim`, whose pages
/// below `next_page_id` exist.
fn pool_on(sim: &SimStorage, frames: usize, next_page_id: PageId) -> Arc<BufferPool> {
    let file = sim
        .open(Path::new("/db/data"), OpenMode::CreateIfMissing)
        .unwrap();
    let config = PoolConfig {
        page_size: 4096,
        frames,
    };
    BufferPool::start(config, file, next_page_id, Vec::new()).unwrap()
}

/// A data file whose page ids are used up refuses new pages with its
/// own error, naming the file, and takes no id beyond the last.
#[test]
fn allocating_past_the_last_page_id_is_data_file_full() {
    let pool = sim_pool_from(16, MAX_PAGES);
    match pool.allocate(PageKind::BtreeLeaf) {
        Err(Error::DataFileFull { path, pages }) => {
            assert_eq!(path, Path::new("/db/data"));
            assert_eq!(pages, MAX_PAGES);
        }
        r => panic!("expected DataFileFull, got {:?}", r.map(|g| g.page_id())),
    }
    assert_eq!(pool.next_page_id(), MAX_PAGES);
    pool.stop();
}

/// A budget the machine cannot map is an error, not an abort, and
/// more frames than frame ids is refused before any memory is taken.
#[test]
fn an_impossible_budget_is_an_error() {
    let sim = SimStorage::new(1);
    sim.create_dir_all(Path::new("/db")).unwrap();
    let file = sim
        .open(Path::new("/db/data"), OpenMode::CreateIfMissing)
        .unwrap();
    let start = |page_size, frames| {
        let config = PoolConfig { page_size, frames };
        BufferPool::start(config, Arc::clone(&file), 1, Vec::new())
    };
    // 2^32 - 1 pages of 64 KiB: 256 TiB, more than a process can map
    // (47 bits of address space), whatever the overcommit policy.
    match start(65536, u32::MAX as usize) {
        Err(Error::OutOfMemory { bytes, .. }) => assert_eq!(bytes, u32::MAX as usize * 65536),
        r => panic!("{r:?}"),
    }
    match start(4096, 1 << 32) {
        Err(Error::InvalidOptions(msg)) => assert!(msg.contains("4294967296"), "{msg}"),
        r => panic!("{r:?}"),
    }
    start(4096, MIN_FRAMES).unwrap().stop();
}

/// A hint is honoured while its frame holds the same page at the same
/// latch version, and refused after anything that could have changed
/// what the frame holds: a write, an exclusive holder, the page freed
/// and its id reallocated in the same frame (same page id, new bytes),
/// eviction, and the frame's reuse by another page.
#[test]
fn a_frame_hint_is_honoured_only_while_its_frame_is_unchanged() {
    let pool = sim_pool(32);
    let hint_of = |pid| pool.optimistic(pid).unwrap().hint().unwrap();
    let pid = {
        let mut g = pool.allocate(PageKind::BtreeLeaf).unwrap();
        g.data_mut()[200] = 7;
        g.page_id()
    };
    let hint = hint_of(pid);
    assert_eq!(hint.page_id(), pid);
    let g = pool.optimistic_hinted(hint).expect("unchanged frame");
    assert_eq!((g.page_id(), g.data()[200]), (pid, 7));
    assert!(g.validate());
    // A holder that changed nothing, or shared holders, change no version.
    drop(pool.exclusive(pid).unwrap());
    let shared = pool.shared(pid).unwrap();
    assert!(pool.optimistic_hinted(hint).is_some());
    drop(shared);

    // A write.
    pool.exclusive(pid).unwrap().data_mut()[200] = 8;
    assert!(pool.optimistic_hinted(hint).is_none());
    let hint = hint_of(pid);
    // An exclusive holder (who may be changing the page).
    let held = pool.exclusive(pid).unwrap();
    assert!(pool.optimistic_hinted(hint).is_none());
    drop(held);
    assert!(pool.optimistic_hinted(hint).is_some());

    // The page freed and its id handed out again, in the same frame.
    pool.free_page(pool.exclusive(pid).unwrap());
    let again = pool.allocate(PageKind::BtreeInner).unwrap();
    assert_eq!(again.page_id(), pid);
    assert_eq!(again.idx, hint.frame, "reallocated in place");
    drop(again);
    assert!(pool.optimistic_hinted(hint).is_none());

    // Eviction, then the frame's reuse by another page.
    let hint = hint_of(pid);
    pool.flush_all().unwrap();
    let (mut hand, mut cooling) = (0, Default::default());
    let mut batch = WritebackBatch::new(pool.page_size, WRITEBACK_BATCH_PAGES);
    let frame = &pool.frames[hint.frame as usize];
    for _ in 0..100 {
        if frame.page_id.load(Ordering::Acquire) != pid {
            break;
        }
        pool.provider_round(&mut hand, &mut cooling, &mut batch);
    }
    assert_ne!(frame.page_id.load(Ordering::Acquire), pid, "evicted");
    assert!(pool.optimistic_hinted(hint).is_none());
    while frame.page_id.load(Ordering::Acquire) == NO_PAGE {
        drop(pool.allocate(PageKind::BtreeLeaf).unwrap());
    }
    assert!(pool.optimistic_hinted(hint).is_none());
    // The page reads back through the page table as usual.
    let g = pool.optimistic(pid).unwrap();
    assert_eq!(page::page_kind(g.data()), Some(PageKind::BtreeInner));
    assert!(g.validate());
    pool.stop();
}

/// A log that is full at GSN 0: the page provider may evict clean pages
/// but writes none of GSN 1 and above, so only the checkpoint
/// increment writes them (the test's interleaving, made certain).
struct FullAtZero;

impl FlushGate for FullAtZero {
    fn ensure_durable(&self, _gsn: Gsn) -> Result<()> {
        Ok(())
    }
    fn is_durable_at(&self, _partition: u32, _end: LogPos) -> bool {
        true
    }
    fn write_limit(&self) -> Gsn {
        Gsn::ZERO
    }
}

/// Regression (found by `waypoint simulate --workload tpcc`, seed 2843,
/// 2026-11-22, about one run in ten, in the TPC-C load): a checkpoint
/// increment waited for a page's latch while the pages it had staged so
/// far sat in its unwritten batch, in writeback, where the page provider
/// cannot evict them; the latch's holder, a worker in the middle of a
/// split, waited for a free frame; with a pool no larger than a batch
/// (64 pages) nothing else was left to evict, and the worker failed
/// after 10 s with `BufferPoolExhausted`. An increment now skips a
/// latched page and comes back to it after writing its batch.
#[test]
fn a_checkpoint_increment_does_not_wait_for_a_latch_while_holding_staged_pages() {
    let pool = sim_pool(MIN_FRAMES);
    pool.set_page_write_policy(PageWritePolicy::StealBehindGate(Arc::new(FullAtZero)));
    pool.write_limit.store(0, Ordering::Release);
    // A dirty page of GSN 1 in every frame (frames are handed out from
    // 0 up).
    let mut guards: Vec<_> = (0..MIN_FRAMES)
        .map(|_| {
            let mut g = pool.allocate(PageKind::BtreeLeaf).unwrap();
            page::set_page_gsn(g.data_mut(), Gsn::new(1));
            g
        })
        .collect();
    // The worker keeps the last frame's page latched.
    let held = guards.pop().unwrap();
    let last = MIN_FRAMES - 1;
    assert_eq!(
        pool.table.entry(held.page_id()).load(Ordering::Acquire),
        last as u64 + 1
    );
    drop(guards);
    std::thread::scope(|s| {
        let increment = s.spawn(|| pool.checkpoint_shard(0, 1));
        // Once the increment has taken every other page, the worker
        // asks for a frame, its latch still held.
        while pool.frames[..last]
            .iter()
            .any(|f| f.dirty.load(Ordering::Acquire))
        {
            std::thread::yield_now();
        }
        let fresh = pool.allocate(PageKind::BtreeLeaf);
        assert!(fresh.is_ok(), "{:?}", fresh.err());
        drop(fresh);
        drop(held);
        assert_eq!(increment.join().unwrap().unwrap(), MIN_FRAMES as u64);
    });
}

/// The byte the policy tests mark a page with.
const MARK: usize = 100;

/// Page `pid`'s mark, read under a shared latch.
fn mark_of(pool: &BufferPool, pid: PageId) -> Result<u8> {
    Ok(pool.shared(pid)?.data()[MARK])
}

/// A pool that keeps dirty pages in memory (the policy of memory-resident
/// schemes) never writes the data file while running. Once the dirty pages
/// leave too few frames for reads besides them it refuses new pages with
/// `MemoryFull`, naming `buffer_pool_bytes`, instead of evicting them;
/// reads go on, of pages on disk (more than the pool holds, so clean
/// pages keep being evicted) and of the pages kept in memory; the clean
/// close's flush then writes them.
#[test]
fn a_pool_keeping_dirty_pages_in_memory_refuses_new_pages_when_full_and_writes_nothing() {
    const FRAMES: usize = 64;
    const ON_DISK: u64 = 200;
    let sim = SimStorage::new(5);
    sim.create_dir_all(Path::new("/db")).unwrap();
    // Pages 1..=ON_DISK on disk, marked with their id.
    let writer = pool_on(&sim, FRAMES, 1);
    for i in 1..=ON_DISK {
        let mut g = writer.allocate(PageKind::BtreeLeaf).unwrap();
        assert_eq!(g.page_id(), i);
        g.data_mut()[MARK] = i as u8;
    }
    writer.flush_all().unwrap();
    writer.stop();
    drop(writer);
    let on_disk = sim.read_current(Path::new("/db/data")).unwrap();
    let io_before = sim.stats();

    let pool = pool_on(&sim, FRAMES, ON_DISK + 1);
    pool.set_page_write_policy(PageWritePolicy::KeepDirtyInMemory);
    // Change pages read from disk and add new ones, reading between.
    let mut kept: Vec<PageId> = Vec::new();
    let expected = |kept: &[PageId], pid: PageId| {
        if kept.contains(&pid) {
            0xEE
        } else {
            pid as u8
        }
    };
    let err = loop {
        let n = kept.len() as u64;
        let read = 1 + (n * 37) % ON_DISK;
        assert_eq!(mark_of(&pool, read).unwrap(), expected(&kept, read));
        let changed = if n & 1 == 0 {
            pool.allocate(PageKind::BtreeLeaf)
        } else {
            pool.exclusive((1..=ON_DISK).find(|p| !kept.contains(p)).unwrap())
        };
        match changed {
            Ok(mut g) => {
                g.data_mut()[MARK] = 0xEE;
                kept.push(g.page_id());
            }
            Err(e) => break e,
        }
        assert!(kept.len() <= FRAMES, "dirty pages were evicted");
    };
    match &err {
        Error::MemoryFull { buffer_pool_bytes } => {
            assert_eq!(*buffer_pool_bytes, (FRAMES * 4096) as u64)
        }
        e => panic!("expected MemoryFull, got {e:?}"),
    }
    assert!(err.to_string().contains("buffer_pool_bytes"), "{err}");
    assert!(matches!(
        pool.check_writable(),
        Err(Error::MemoryFull { .. })
    ));
    pool.check_healthy().unwrap();
    assert!(kept.len() > FRAMES / 2, "{} pages kept", kept.len());

    // Reads go on: every page on disk, twice over the pool's size, and
    // every page kept in memory, unchanged by the refused write.
    for _ in 0..2 {
        for pid in 1..=ON_DISK {
            let mark = mark_of(&pool, pid).unwrap();
            assert_eq!(mark, expected(&kept, pid), "page {pid}");
        }
    }
    for &pid in &kept {
        assert_eq!(mark_of(&pool, pid).unwrap(), 0xEE, "page {pid}");
    }
    // Nothing reached the data file while running.
    let stats = pool.stats();
    assert_eq!(stats.dirty_pages, kept.len());
    assert_eq!(
        (stats.pages_written_by_provider, stats.page_syncs),
        (0, 0),
        "{stats:?}"
    );
    assert!(stats.evictions > 0, "clean pages were evicted: {stats:?}");
    assert_eq!(sim.stats().writes, io_before.writes);
    assert_eq!(sim.stats().data_syncs, io_before.data_syncs);
    assert_eq!(sim.read_current(Path::new("/db/data")).unwrap(), on_disk);

    // The clean close writes what was kept.
    pool.flush_all().unwrap();
    assert_eq!(pool.stats().pages_written_by_flush, kept.len() as u64);
    pool.stop();
    let data = sim.read_current(Path::new("/db/data")).unwrap();
    for &pid in &kept {
        assert_eq!(data[pid as usize * 4096 + MARK], 0xEE, "page {pid}");
    }
}

/// Steal behind a gate (the WAL rule): a batch reaches the data file only
/// after the gate was asked to make the log durable up to the batch's
/// largest page GSN; a page above what the gate can vouch for is never
/// written, and stays dirty.
#[test]
fn a_gated_pool_writes_a_page_only_after_the_gate_made_its_gsn_durable() {
    /// Durable up to `durable`; `ensure_durable` raises it when allowed and
    /// checks that no page above it is in the data file yet.
    struct Gate {
        sim: SimStorage,
        durable: AtomicU64,
        asked: AtomicU64,
        can_reach: Gsn,
    }
    impl FlushGate for Gate {
        fn ensure_durable(&self, gsn: Gsn) -> Result<()> {
            self.asked.fetch_max(gsn.get(), Ordering::AcqRel);
            let data = self.sim.read_current(Path::new("/db/data"));
            for page in data.unwrap_or_default().chunks(4096) {
                assert!(page::page_gsn(page).get() <= self.durable.load(Ordering::Acquire));
            }
            if gsn > self.can_reach {
                return Err(Error::LogFull {
                    path: "/db/wal".into(),
                    cause: "test".into(),
                });
            }
            self.durable.fetch_max(gsn.get(), Ordering::AcqRel);
            Ok(())
        }
        fn is_durable_at(&self, _partition: u32, _end: LogPos) -> bool {
            true
        }
        fn write_limit(&self) -> Gsn {
            self.can_reach
        }
    }
    let sim = SimStorage::new(6);
    sim.create_dir_all(Path::new("/db")).unwrap();
    let pool = pool_on(&sim, 32, 1);
    let gate = Arc::new(Gate {
        sim: sim.clone(),
        durable: AtomicU64::new(0),
        asked: AtomicU64::new(0),
        can_reach: Gsn::new(10),
    });
    pool.set_page_write_policy(PageWritePolicy::StealBehindGate(gate.clone()));
    let pids: Vec<PageId> = [4, 9, 7]
        .into_iter()
        .map(|gsn| {
            let mut g = pool.allocate(PageKind::BtreeLeaf).unwrap();
            page::set_page_gsn(g.data_mut(), Gsn::new(gsn));
            g.page_id()
        })
        .collect();
    pool.flush_all().unwrap();
    assert_eq!(
        gate.asked.load(Ordering::Acquire),
        9,
        "the batch's largest GSN"
    );
    assert_eq!(pool.stats().pages_written_by_flush, 3);
    // A page above what the log can reach: refused, not written, dirty.
    page::set_page_gsn(pool.exclusive(pids[0]).unwrap().data_mut(), Gsn::new(11));
    assert!(pool.flush_all().unwrap_err().is_log_full());
    assert_eq!(pool.stats().pages_written_by_flush, 3);
    assert_eq!(pool.stats().dirty_pages, 1);
    let data = sim.read_current(Path::new("/db/data")).unwrap();
    assert_eq!(page::page_gsn(&data[pids[0] as usize * 4096..]), Gsn::new(4));
    pool.check_healthy().unwrap();
    pool.stop();
}
