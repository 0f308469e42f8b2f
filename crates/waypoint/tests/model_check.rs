//! Model checking of the concurrency protocols with shuttle (issue 6):
//! randomized (and PCT) schedules of small models, each with an assertion
//! that fails if the protocol is broken, and for each a deliberately broken
//! variant that shuttle must catch (`#[should_panic]` tests), which shows
//! the check can fail.
//!
//! - [`latch`]: the real `buffer::latch::HybridLatch`, compiled from its
//!   source file with `crate::sync` mapped to shuttle (see `src/sync.rs`).
//! - [`commit`]: a reduced model of the log partitions' group commit, the
//!   durable-GSN publication and RFA's needsRemoteFlush bookkeeping
//!   (`logstore/stream/`, `wal/partition.rs`, `wal/log/`).
//! - [`wake`]: the log writer's wake-up protocol (`logstore::stream`'s
//!   `WriterWait`):
//!   no flush request is lost, waited for or not.
//! - [`writeback`]: a reduced model of a frame's writeback state
//!   (`buffer/pool/`: stage, write_batch, eviction, checkpoint_shard).
//! - [`scan`]: commit-time validation of scans and point reads against a
//!   writer that installs and releases meanwhile (`txn::validate`).
//!
//! Shuttle explores interleavings at its own scheduling points (every
//! atomic access, lock, condvar wait, yield) and treats every atomic as
//! sequentially consistent: it checks the protocols' logic, not the memory
//! orderings. `WAYPOINT_SHUTTLE_ITERS` sets the schedules per test (default
//! 300, each test also runs a PCT pass of the same size); a long run:
//! `WAYPOINT_SHUTTLE_ITERS=100000 cargo test --release -p waypoint --test model_check`.

use std::sync::Arc;

/// What `crate::sync` is for the latch source compiled below: shuttle's
/// atomics, and every wait a yield to shuttle's scheduler (a spin that
/// never yields would never let the latch holder run).
mod sync {
    pub(crate) mod atomic {
        pub(crate) use shuttle::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
    }
    /// Two stripes: two session readers in different stripes, and the
    /// writer's drain loop crosses more than one.
    pub(crate) const STRIPES: usize = 2;
    /// `parking_lot`'s lock API (no poisoning) over shuttle's lock.
    pub(crate) struct RwLock<T>(shuttle::sync::RwLock<T>);
    pub(crate) type RwLockReadGuard<'a, T> = shuttle::sync::RwLockReadGuard<'a, T>;
    pub(crate) type RwLockWriteGuard<'a, T> = shuttle::sync::RwLockWriteGuard<'a, T>;
    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> Self {
            RwLock(shuttle::sync::RwLock::new(value))
        }
        pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
            self.0.read().expect("not poisoned")
        }
        pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
            self.0.write().expect("not poisoned")
        }
    }
    pub(crate) fn spin_loop() {
        shuttle::thread::yield_now()
    }
    pub(crate) fn yield_now() {
        shuttle::thread::yield_now()
    }
    pub(crate) fn sleep(_: std::time::Duration) {
        shuttle::thread::yield_now()
    }
}

/// The engine's latch, the same source file.
#[path = "../src/buffer/latch.rs"]
#[allow(dead_code)]
mod real_latch;

/// The engine's quiesce lock, the same source file.
#[path = "../src/txn/quiesce.rs"]
#[allow(dead_code)]
mod real_quiesce;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A model, shareable across shuttle's schedules.
type Model = Arc<dyn Fn() + Send + Sync>;

fn run(model: &Model, seed: u64, iterations: usize, pct: bool) {
    use shuttle::scheduler::{PctScheduler, RandomScheduler};
    std::env::set_var(shuttle::SILENCE_WARNINGS, "1");
    let m = Arc::clone(model);
    let body = move || m();
    if pct {
        let scheduler = PctScheduler::new_from_seed(seed, 3, iterations);
        shuttle::Runner::new(scheduler, shuttle::Config::default()).run(body);
    } else {
        let scheduler = RandomScheduler::new_from_seed(seed, iterations);
        shuttle::Runner::new(scheduler, shuttle::Config::default()).run(body);
    }
}

/// Run `model` for `WAYPOINT_SHUTTLE_ITERS` (default 2,000) schedules under
/// PCT (depth 3: good at starving one thread, which most of these bugs
/// need) and as many under the random scheduler, seeded from
/// `WAYPOINT_SHUTTLE_SEED` (default 0: the same schedules every run; set
/// it to explore others).
fn check(model: impl Fn() + Send + Sync + 'static) {
    let model: Model = Arc::new(model);
    let iterations = env("WAYPOINT_SHUTTLE_ITERS", 2_000) as usize;
    let seed = env("WAYPOINT_SHUTTLE_SEED", 0);
    run(&model, seed, iterations, true);
    run(&model, seed, iterations, false);
}

/// For a broken variant: PCT then random, seed after seed, until shuttle
/// finds the bug (the model's assertion panics). Each is found within the
/// first seed's budget in practice (`explore_budgets` measured the
/// schedules needed: at most about 6,000, most within a few hundred).
fn find_bug(model: impl Fn() + Send + Sync + 'static) {
    let model: Model = Arc::new(model);
    for seed in 0..4 {
        run(&model, seed, 20_000, true);
        run(&model, seed, 20_000, false);
    }
}

/// The optimistic latch (`buffer/latch.rs`), the real type: writers change
/// two words they keep equal, one at a time (each access a scheduling
/// point, so a reader can land between them); optimistic readers validate,
/// shared readers hold the latch, upgraders turn a validated optimistic
/// read into exclusive access and build on what they read.
mod latch {
    use super::real_latch::HybridLatch;
    use shuttle::sync::atomic::{AtomicU64, Ordering};
    use shuttle::thread;
    use std::sync::Arc;

    #[derive(Clone, Copy, PartialEq)]
    pub enum Bug {
        None,
        /// A reader uses what it read without `validate`.
        SkipValidation,
        /// A writer modifies, then releases with
        /// `unlock_exclusive_unchanged` (the version does not move).
        ReleaseUnchanged,
    }

    #[derive(Default)]
    struct Protected {
        latch: HybridLatch,
        a: AtomicU64,
        b: AtomicU64,
    }

    fn write(p: &Protected, bug: Bug) {
        p.latch.exclusive();
        let v = p.a.load(Ordering::Relaxed) + 1;
        p.a.store(v, Ordering::Relaxed);
        p.b.store(v, Ordering::Relaxed);
        if bug == Bug::ReleaseUnchanged {
            p.latch.unlock_exclusive_unchanged();
        } else {
            p.latch.unlock_exclusive();
        }
    }

    /// An optimistic read that validates saw a consistent state.
    fn optimistic_read(p: &Protected, bug: Bug) -> u64 {
        loop {
            let v = p.latch.optimistic_wait();
            let a = p.a.load(Ordering::Relaxed);
            let b = p.b.load(Ordering::Relaxed);
            if bug == Bug::SkipValidation || p.latch.validate(v) {
                assert_eq!(a, b, "a validated optimistic read saw a half-done write");
                return a;
            }
        }
    }

    /// Optimistic read, then `try_upgrade`: if it succeeds nothing changed
    /// since the read, so an increment built on it loses no update.
    fn upgrade_and_increment(p: &Protected) -> bool {
        let v = p.latch.optimistic_wait();
        let seen = p.a.load(Ordering::Relaxed);
        if !p.latch.try_upgrade(v) {
            return false;
        }
        assert_eq!(
            p.a.load(Ordering::Relaxed),
            seen,
            "an upgrade succeeded although the data changed since the optimistic read"
        );
        p.a.store(seen + 1, Ordering::Relaxed);
        p.b.store(seen + 1, Ordering::Relaxed);
        p.latch.unlock_exclusive();
        true
    }

    /// `try_shared_at`: a shared latch at the version read, or nothing.
    fn share_at_version(p: &Protected) {
        let v = p.latch.optimistic_wait();
        let seen = p.a.load(Ordering::Relaxed);
        if p.latch.try_shared_at(v) {
            assert_eq!(
                p.a.load(Ordering::Relaxed),
                seen,
                "shared at a stale version"
            );
            assert_eq!(p.a.load(Ordering::Relaxed), p.b.load(Ordering::Relaxed));
            p.latch.unlock_shared();
        }
    }

    fn shared_read(p: &Protected) {
        p.latch.shared();
        let a = p.a.load(Ordering::Relaxed);
        let b = p.b.load(Ordering::Relaxed);
        assert_eq!(a, b, "a shared reader saw a writer at work");
        p.latch.unlock_shared();
    }

    pub fn model(bug: Bug) {
        let p = Arc::new(Protected::default());
        let mut handles = Vec::new();
        for _ in 0..2 {
            let p = Arc::clone(&p);
            handles.push(thread::spawn(move || {
                write(&p, bug);
                write(&p, bug);
                0u64
            }));
        }
        {
            let p = Arc::clone(&p);
            handles.push(thread::spawn(move || {
                optimistic_read(&p, bug);
                optimistic_read(&p, bug);
                0
            }));
        }
        {
            let p = Arc::clone(&p);
            handles.push(thread::spawn(move || {
                shared_read(&p);
                share_at_version(&p);
                u64::from(upgrade_and_increment(&p))
            }));
        }
        let upgrades: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        // No update lost: two writers twice each, plus the upgrades.
        let a = p.a.load(Ordering::Relaxed);
        if bug == Bug::None {
            assert_eq!(a, 4 + upgrades, "an update was lost");
        }
        assert!(p.latch.optimistic().is_some(), "the latch is left held");
    }
}

#[test]
fn latch_protocol_holds() {
    check(|| latch::model(latch::Bug::None));
}

/// The check can fail: a reader that skips validation is caught.
#[test]
#[should_panic(expected = "half-done write")]
fn latch_model_catches_a_reader_that_skips_validation() {
    find_bug(|| latch::model(latch::Bug::SkipValidation));
}

/// The check can fail: a writer whose release does not move the version
/// lets a validated optimistic read (or an upgrade) miss its change.
#[test]
#[should_panic]
fn latch_model_catches_a_release_that_does_not_move_the_version() {
    find_bug(|| latch::model(latch::Bug::ReleaseUnchanged));
}

/// Group commit, durable-GSN publication and Remote Flush Avoidance,
/// reduced. Two log partitions, each with a writer thread (the real
/// `Stream::writer_loop`: take what was appended, write and sync it
/// without the lock, then publish `durable_gsn`, `durable` and the durable
/// commit TIDs), and one session per partition. Records carry GSNs by the
/// GSN protocol of `WalSessionLog::log_pages` (above the page's and the
/// transaction's GSN and the partition clock; the clock word carries a
/// reservation bit from the reservation's compare-and-swap until the
/// append clears it, and `flushed_gsn` vouches only for a word without it). A transaction locks its
/// keys (the commit locks), changes pages under their latch, appends its
/// commit record, releases the keys (early lock release), then waits as
/// `on_commit` decides:
/// - a page whose GSN is above GSN_flushed (taken at the first write) and
///   whose last writer is another partition: needsRemoteFlush (RFA, seed 000 §3.2);
/// - an overwritten key whose TID (ending in its writer's slot) is above
///   that partition's durable commit TID: needsRemoteFlush (read
///   dependency);
/// - a session whose previous remote-dependent commit is not yet durable:
///   needsRemoteFlush (pipelining);
/// - needsRemoteFlush: wait for every partition up to its appended position
///   captured after the own commit record, then publish the TID as durable;
///   else: the own partition, and the writer publishes the TID.
///
/// Session A runs on partition 0, session B on partition 1, each
/// committing a few transactions pipelined over the keys of pages X, Y and
/// Z ([`commit::Workload`]: one workload per dependency kind, and all of
/// them at once), with a page writer asking the WAL gate for page X in
/// some. The ground truth: what the writers synced. At each
/// acknowledgement the commit must be *recoverable* as recovery decides it
/// (docs/decisions/022-recovery-and-the-gap-rule.md): its commit record synced, every earlier
/// record on each page it changed synced (else redo stops at a gap), and
/// every commit it read or overwrote recoverable too (else recovery undoes
/// that one under it).
mod commit {
    use shuttle::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use shuttle::sync::{Condvar, Mutex};
    use shuttle::thread;
    use std::collections::{HashMap, VecDeque};
    use std::sync::Arc;

    #[derive(Clone, Copy, PartialEq, Debug)]
    pub enum Bug {
        None,
        /// `Partition::flushed_gsn` vouches for an idle partition's clock
        /// although a GSN was reserved and its record is not appended yet.
        NoReservedFlag,
        /// Only the paper's page-GSN check: no TID (read dependency) check.
        NoTidCheck,
        /// A pipelined successor of a remote-dependent commit flushes only
        /// its own partition.
        NoPipelineCarry,
        /// RFA switched off: never wait for other partitions
        /// (`Wal::set_broken_rfa_for_tests`).
        NoRemoteFlush,
        /// The writer publishes `durable_gsn` before `durable` (the order
        /// before the fix in RELIABILITY.md, "the WAL-rule check fired on
        /// synced pages"): a page writer trusting the new
        /// GSN_flushed reads the old position, and the pool's independent
        /// WAL-rule check refuses a page whose log is in fact synced.
        GsnBeforePosition,
    }

    const PARTS: usize = 2;
    const SLOT_BITS: u32 = 4;

    struct Stage1 {
        /// GSNs of records appended and not yet taken by the writer.
        current: Vec<u64>,
        /// (end position, TID) of commit records not yet durable.
        commits: VecDeque<(u64, u64)>,
        flush_requested: u64,
        shutdown: bool,
    }

    /// `partition::RESERVED`: bit 63 of the clock word.
    const RESERVED_BIT: u64 = 1 << 63;

    struct Partition {
        stage1: Mutex<Stage1>,
        work: Condvar,
        durable_cv: Condvar,
        /// Positions count records: record n ends at position n.
        appended: AtomicU64,
        durable: AtomicU64,
        durable_gsn: AtomicU64,
        /// GSN clock and `RESERVED_BIT`, one word.
        clock: AtomicU64,
        durable_commit_tid: AtomicU64,
        /// Ground truth: what a crash now would keep.
        synced: AtomicU64,
    }

    impl Partition {
        fn new() -> Self {
            Partition {
                stage1: Mutex::new(Stage1 {
                    current: Vec::new(),
                    commits: VecDeque::new(),
                    flush_requested: 0,
                    shutdown: false,
                }),
                work: Condvar::new(),
                durable_cv: Condvar::new(),
                appended: AtomicU64::new(0),
                durable: AtomicU64::new(0),
                durable_gsn: AtomicU64::new(0),
                clock: AtomicU64::new(0),
                durable_commit_tid: AtomicU64::new(0),
                synced: AtomicU64::new(0),
            }
        }

        /// `Partition::clock`.
        fn clock(&self) -> u64 {
            self.clock.load(Ordering::SeqCst) & !RESERVED_BIT
        }

        /// `Partition::reserve_gsns`: one compare-and-swap, no lock.
        fn reserve_gsn(&self, floor: u64) -> u64 {
            loop {
                let word = self.clock.load(Ordering::SeqCst);
                let gsn = floor.max(word & !RESERVED_BIT) + 1;
                if self
                    .clock
                    .compare_exchange(word, gsn | RESERVED_BIT, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return gsn;
                }
            }
        }

        /// `Partition::append_group`: returns the end position. `appended`
        /// moves before the reservation bit is cleared: by a plain store
        /// while the bit is set (no other thread changes the word then),
        /// else by a compare-and-swap.
        fn append(&self, gsn: u64) -> u64 {
            let mut s = self.stage1.lock().unwrap();
            s.current.push(gsn);
            let end = self.appended.load(Ordering::SeqCst) + 1;
            self.appended.store(end, Ordering::SeqCst);
            loop {
                let word = self.clock.load(Ordering::SeqCst);
                let cleared = (word & !RESERVED_BIT).max(gsn);
                if word & RESERVED_BIT != 0 {
                    self.clock.store(cleared, Ordering::SeqCst);
                    return end;
                }
                if self
                    .clock
                    .compare_exchange(word, cleared, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return end;
                }
            }
        }

        /// `Partition::flushed_gsn`: no lock; vouches only for a clock word
        /// read (or swapped in) without the reservation bit, after seeing
        /// every appended record durable.
        fn flushed_gsn(&self, global: u64, bug: Bug) -> u64 {
            let mut word = self.clock.load(Ordering::SeqCst);
            loop {
                let reserved = bug != Bug::NoReservedFlag && word & RESERVED_BIT != 0;
                let all_durable =
                    self.durable.load(Ordering::SeqCst) == self.appended.load(Ordering::SeqCst);
                if reserved || !all_durable {
                    return self.durable_gsn.load(Ordering::SeqCst);
                }
                let raised = (word & !RESERVED_BIT).max(global);
                if raised == word {
                    return word;
                }
                match self
                    .clock
                    .compare_exchange(word, raised, Ordering::SeqCst, Ordering::SeqCst)
                {
                    Ok(_) => return raised,
                    Err(now) => word = now,
                }
            }
        }

        /// `Partition::note_commit`.
        fn note_commit(&self, tid: u64, end: u64) {
            let mut s = self.stage1.lock().unwrap();
            if self.durable.load(Ordering::SeqCst) >= end {
                self.durable_commit_tid.fetch_max(tid, Ordering::SeqCst);
            } else {
                s.commits.push_back((end, tid));
            }
        }

        fn request_flush(&self, position: u64) {
            let mut s = self.stage1.lock().unwrap();
            if position > s.flush_requested {
                s.flush_requested = position;
                self.work.notify_one();
            }
        }

        fn wait_durable(&self, position: u64) {
            if self.durable.load(Ordering::SeqCst) >= position {
                return;
            }
            self.request_flush(position);
            let mut s = self.stage1.lock().unwrap();
            while self.durable.load(Ordering::SeqCst) < position {
                s = self.durable_cv.wait(s).unwrap();
            }
        }

        /// `Stream::writer_loop` + `write_chunks`.
        fn writer_loop(&self, bug: Bug) {
            loop {
                let (gsns, end) = {
                    let mut s = self.stage1.lock().unwrap();
                    loop {
                        let wanted = s.flush_requested > self.durable.load(Ordering::SeqCst)
                            && !s.current.is_empty();
                        if wanted {
                            break;
                        }
                        if s.shutdown {
                            return;
                        }
                        s = self.work.wait(s).unwrap();
                    }
                    let gsns = std::mem::take(&mut s.current);
                    (gsns, self.appended.load(Ordering::SeqCst))
                };
                // Write and fdatasync, without the lock: a crash from here
                // on keeps these records.
                thread::yield_now();
                self.synced.fetch_max(end, Ordering::SeqCst);
                let max_gsn = gsns.iter().copied().max().unwrap_or(0);
                // The position first: whoever sees the new GSN_flushed must
                // see these records as durable too.
                if bug == Bug::GsnBeforePosition {
                    self.durable_gsn.fetch_max(max_gsn, Ordering::SeqCst);
                }
                let before = self.durable.fetch_max(end, Ordering::SeqCst);
                if bug != Bug::GsnBeforePosition {
                    self.durable_gsn.fetch_max(max_gsn, Ordering::SeqCst);
                }
                assert!(before <= end);
                assert!(
                    self.durable.load(Ordering::SeqCst) <= self.synced.load(Ordering::SeqCst),
                    "durability published beyond what was synced"
                );
                let mut s = self.stage1.lock().unwrap();
                while let Some(&(e, tid)) = s.commits.front() {
                    if e > end {
                        break;
                    }
                    self.durable_commit_tid.fetch_max(tid, Ordering::SeqCst);
                    s.commits.pop_front();
                }
                self.durable_cv.notify_all();
            }
        }
    }

    /// A page: its GSN and last writer (under its latch), the partitions'
    /// records on it, and its keys' TIDs.
    #[derive(Default)]
    struct Page {
        gsn: u64,
        last_writer: Option<usize>,
        /// Per partition, the end position of its newest record on the page.
        chain: [u64; PARTS],
        tids: HashMap<&'static str, u64>,
    }

    /// What recovery needs of a commit: positions that must be synced, and
    /// the commits it read or overwrote.
    #[derive(Clone, Default, Debug)]
    struct Needs {
        synced: [u64; PARTS],
        commits: Vec<u64>,
    }

    struct World {
        bug: Bug,
        parts: Vec<Partition>,
        pages: HashMap<&'static str, Mutex<Page>>,
        /// Commit locks by key.
        keys: HashMap<&'static str, Mutex<()>>,
        needs: Mutex<HashMap<u64, Needs>>,
        done: AtomicBool,
    }

    impl World {
        /// `Wal::flushed_gsn`.
        fn flushed_gsn(&self) -> u64 {
            let global = self.parts.iter().map(|p| p.clock()).max().unwrap();
            self.parts
                .iter()
                .map(|p| p.flushed_gsn(global, self.bug))
                .min()
                .unwrap()
        }

        fn recoverable(&self, tid: u64) -> Result<(), String> {
            let needs = self.needs.lock().unwrap().get(&tid).cloned();
            let needs = needs.ok_or_else(|| format!("commit {tid} unknown"))?;
            for (p, &pos) in needs.synced.iter().enumerate() {
                let synced = self.parts[p].synced.load(Ordering::SeqCst);
                if synced < pos {
                    return Err(format!(
                        "commit {tid:#x} needs partition {p} synced to {pos}, it is at {synced}"
                    ));
                }
            }
            for t in needs.commits {
                self.recoverable(t)?;
            }
            Ok(())
        }
    }

    /// The commit a session still has to see durable before it may treat
    /// its next commit as own-partition only (`unresolved_remote`).
    type Ticket = Vec<(usize, u64)>;

    struct Session<'w> {
        w: &'w World,
        slot: usize,
        seq: u64,
        unresolved_remote: Option<Ticket>,
    }

    impl<'w> Session<'w> {
        fn durable(&self, t: &Ticket) -> bool {
            t.iter()
                .all(|&(p, pos)| self.w.parts[p].durable.load(Ordering::SeqCst) >= pos)
        }

        /// One transaction writing `writes` (page, key); returns its TID and
        /// what it waits for. Waiting is separate (pipelining).
        fn commit(
            &mut self,
            writes: &[(&'static str, &'static str)],
            flush_early: bool,
        ) -> (u64, Ticket, bool) {
            let w = self.w;
            let own = &w.parts[self.slot];
            self.seq += 1;
            let tid = (self.seq << SLOT_BITS) | self.slot as u64;
            let mut keys: Vec<&str> = writes.iter().map(|(_, k)| *k).collect();
            keys.sort();
            keys.dedup();
            let guards: Vec<_> = keys.iter().map(|k| w.keys[k].lock().unwrap()).collect();
            let mut needs = Needs::default();
            let mut needs_remote = false;
            let mut flushed_at_start = None;
            let mut gsn = own.clock();
            let mut observed = Vec::new();
            for (page, key) in writes {
                let mut pg = w.pages[page].lock().unwrap();
                let flushed = *flushed_at_start.get_or_insert_with(|| w.flushed_gsn());
                if pg.gsn > flushed && pg.last_writer.is_some_and(|l| l != self.slot) {
                    needs_remote = true;
                }
                for p in 0..PARTS {
                    needs.synced[p] = needs.synced[p].max(pg.chain[p]);
                }
                if let Some(&old) = pg.tids.get(key) {
                    observed.push(old);
                    needs.commits.push(old);
                }
                gsn = own.reserve_gsn(gsn.max(pg.gsn));
                thread::yield_now(); // encoding the record
                let end = own.append(gsn);
                pg.gsn = gsn;
                pg.last_writer = Some(self.slot);
                pg.chain[self.slot] = end;
                pg.tids.insert(key, tid);
            }
            if flush_early {
                own.wait_durable(own.appended.load(Ordering::SeqCst));
            }
            // on_commit
            if let Some(prev) = &self.unresolved_remote {
                if self.durable(prev) {
                    self.unresolved_remote = None;
                } else if w.bug != Bug::NoPipelineCarry {
                    needs_remote = true;
                }
            }
            if w.bug != Bug::NoTidCheck && !needs_remote {
                for &t in &observed {
                    let writer = (t & ((1 << SLOT_BITS) - 1)) as usize;
                    if writer != self.slot
                        && w.parts[writer].durable_commit_tid.load(Ordering::SeqCst) < t
                    {
                        needs_remote = true;
                    }
                }
            }
            if w.bug == Bug::NoRemoteFlush {
                needs_remote = false;
            }
            let commit_gsn = own.reserve_gsn(gsn);
            let end = own.append(commit_gsn);
            needs.synced[self.slot] = end;
            w.needs.lock().unwrap().insert(tid, needs);
            if !needs_remote {
                own.note_commit(tid, end);
            }
            let mut ticket = vec![(self.slot, end)];
            if needs_remote {
                for (p, part) in w.parts.iter().enumerate() {
                    if p != self.slot {
                        ticket.push((p, part.appended.load(Ordering::SeqCst)));
                    }
                }
                self.unresolved_remote = Some(ticket.clone());
            }
            for &(p, pos) in &ticket {
                w.parts[p].request_flush(pos);
            }
            drop(guards); // early lock release, before durability
            (tid, ticket, needs_remote)
        }

        /// `CommitTicket::wait`, then the acknowledgement's check.
        fn wait(&self, (tid, ticket, remote): (u64, Ticket, bool)) {
            for &(p, pos) in &ticket {
                self.w.parts[p].wait_durable(pos);
            }
            if remote {
                self.w.parts[self.slot]
                    .durable_commit_tid
                    .fetch_max(tid, Ordering::SeqCst);
            }
            if let Err(e) = self.w.recoverable(tid) {
                panic!("acknowledged a commit recovery would not keep: {e}");
            }
        }
    }

    type Txn = &'static [(&'static str, &'static str)];

    /// What the two sessions run (each commits its transactions pipelined,
    /// then waits for them), and whether a page writer asks the WAL gate
    /// for page X's GSN meanwhile (`FlushGate::ensure_durable`, which makes
    /// a transaction's page record durable before its commit record).
    pub struct Workload {
        pub a: &'static [Txn],
        pub b: &'static [Txn],
        pub gate: bool,
        /// A's page records are made durable before its commit records (as
        /// the page provider's WAL gate or a full chunk does).
        pub a_flushes_early: bool,
    }

    /// B's first write (Y) takes GSN_flushed while A may have reserved the
    /// GSN of its record on X; then B writes another key of X.
    pub const RESERVED: Workload = Workload {
        a: &[&[("X", "x1")]],
        b: &[&[("Y", "y"), ("X", "x2")]],
        gate: false,
        a_flushes_early: false,
    };
    /// A's record on X may be durable before its commit record; B then
    /// overwrites A's key: only the TID check sees the read dependency.
    pub const READ: Workload = Workload {
        a: &[&[("X", "x1")]],
        b: &[&[("X", "x1")]],
        gate: false,
        a_flushes_early: true,
    };
    /// B's first commit depends on A's record on X; B's pipelined second
    /// commit overwrites B's own key (no remote check applies to it) and is
    /// waited for first.
    pub const PIPELINE: Workload = Workload {
        a: &[&[("X", "x1"), ("Z", "z")]],
        b: &[&[("X", "x2")], &[("X", "x2")]],
        gate: false,
        a_flushes_early: false,
    };
    /// Everything at once.
    pub const MIXED: Workload = Workload {
        a: &[&[("Z", "z")], &[("X", "x1")]],
        b: &[&[("Y", "y"), ("X", "x2")], &[("X", "x1"), ("X", "x2")]],
        gate: true,
        a_flushes_early: false,
    };
    pub const ALL: [&Workload; 4] = [&RESERVED, &READ, &PIPELINE, &MIXED];

    pub fn model(bug: Bug, workload: &'static Workload) {
        let mut pages = HashMap::new();
        for p in ["X", "Y", "Z"] {
            pages.insert(p, Mutex::new(Page::default()));
        }
        let mut keys = HashMap::new();
        for k in ["x1", "x2", "y", "z"] {
            keys.insert(k, Mutex::new(()));
        }
        let w = Arc::new(World {
            bug,
            parts: (0..PARTS).map(|_| Partition::new()).collect(),
            pages,
            keys,
            needs: Mutex::new(HashMap::new()),
            done: AtomicBool::new(false),
        });
        let writers: Vec<_> = (0..PARTS)
            .map(|p| {
                let w = Arc::clone(&w);
                thread::spawn(move || w.parts[p].writer_loop(w.bug))
            })
            .collect();
        let sessions: Vec<_> = [workload.a, workload.b]
            .into_iter()
            .enumerate()
            .map(|(slot, txns)| {
                let w = Arc::clone(&w);
                thread::spawn(move || {
                    let mut s = Session {
                        w: &w,
                        slot,
                        seq: 0,
                        unresolved_remote: None,
                    };
                    let early = slot == 0 && workload.a_flushes_early;
                    let pending: Vec<_> = txns.iter().map(|t| s.commit(t, early)).collect();
                    // Pipelined handles may be waited for in any order: the
                    // newest first.
                    for p in pending.into_iter().rev() {
                        s.wait(p);
                    }
                })
            })
            .collect();
        let gate = workload.gate.then(|| {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                // The page provider writing page X: the copy (GSN, last
                // writer and its record's end, as the frame remembers them),
                // `Wal::ensure_durable`, then `BufferPool::write_batch`'s
                // independent check of the WAL rule.
                // Twice: the page may change and be written again.
                for _ in 0..2 {
                    let (gsn, last) = {
                        let pg = w.pages["X"].lock().unwrap();
                        (pg.gsn, pg.last_writer.map(|p| (p, pg.chain[p])))
                    };
                    for p in &w.parts {
                        if p.flushed_gsn(0, w.bug) < gsn {
                            p.wait_durable(p.appended.load(Ordering::SeqCst));
                        }
                    }
                    if let Some((p, end)) = last {
                        let durable = w.parts[p].durable.load(Ordering::SeqCst);
                        assert!(
                            durable >= end,
                            "WAL-rule check: page X's last record ends at {end} of partition {p}, durable to {durable}, after the gate"
                        );
                    }
                }
            })
        });
        for h in sessions {
            h.join().unwrap();
        }
        if let Some(h) = gate {
            h.join().unwrap();
        }
        w.done.store(true, Ordering::SeqCst);
        for p in &w.parts {
            p.stage1.lock().unwrap().shutdown = true;
            p.work.notify_all();
        }
        for h in writers {
            h.join().unwrap();
        }
    }
}

#[test]
fn commit_protocol_acknowledges_only_recoverable_commits() {
    for workload in commit::ALL {
        check(move || commit::model(commit::Bug::None, workload));
    }
}

/// The check can fail: without the `reserved` flag, GSN_flushed vouches
/// for a GSN whose record is not even appended (a physical dependency is
/// then missed).
#[test]
#[should_panic(expected = "recovery would not keep")]
fn commit_model_catches_gsn_flushed_ignoring_a_reserved_gsn() {
    find_bug(|| commit::model(commit::Bug::NoReservedFlag, &commit::RESERVED));
}

/// The check can fail: the paper's page-GSN check alone misses a read
/// dependency on a commit whose record is durable but whose commit record
/// is not (docs/decisions/011-commit-dependencies-and-protocols.md).
#[test]
#[should_panic(expected = "recovery would not keep")]
fn commit_model_catches_a_missing_tid_check() {
    find_bug(|| commit::model(commit::Bug::NoTidCheck, &commit::READ));
}

/// The check can fail: a pipelined successor that overwrote its
/// remote-dependent predecessor must wait for the predecessor's remote
/// dependencies too.
#[test]
#[should_panic(expected = "recovery would not keep")]
fn commit_model_catches_a_pipelined_successor_that_flushes_only_its_own_partition() {
    find_bug(|| commit::model(commit::Bug::NoPipelineCarry, &commit::PIPELINE));
}

/// The check can fail: a writer that publishes GSN_flushed before the
/// durable position makes the WAL-rule check after the gate refuse a page
/// whose log is synced (RELIABILITY.md, "the WAL-rule check fired on
/// synced pages", seen in the engine as a
/// poisoned pool about once in 6-26 runs of a bank test).
#[test]
#[should_panic(expected = "WAL-rule check")]
fn commit_model_catches_gsn_flushed_published_before_the_durable_position() {
    find_bug(|| commit::model(commit::Bug::GsnBeforePosition, &commit::MIXED));
}

/// The check can fail: RFA switched off entirely.
#[test]
#[should_panic(expected = "recovery would not keep")]
fn commit_model_catches_rfa_switched_off() {
    find_bug(|| commit::model(commit::Bug::NoRemoteFlush, &commit::MIXED));
}

/// The log writer's wake-up protocol (`logstore::stream`'s `WriterWait`,
/// `Stream::writer_loop`, the flush requests, `wait_durable`, `sync_to`),
/// reduced to one partition whose records are positions. The writer says
/// why it sleeps, and each waker wakes it only when the news matters for
/// that reason: a lazy (group) request only an idle writer (and without the
/// stage-1 lock unless the writer is idle: it raises an atomic position and
/// reads an atomic "idle" flag, which the writer sets before it re-reads the
/// position and sleeps), a flush request any writer but a pacing one, the end of a committer's own write only a
/// writer waiting for that write. The timed waits (pacing, the group
/// window) end by themselves, so here they are yields that advance a
/// virtual clock (shuttle's timed waits never time out); the untimed ones
/// (idle, waiting for a write) are condvar waits. Checks: every blocking
/// wait returns, and every request, waited for or not, becomes durable
/// without any further event: the main thread waits for them passively (no
/// request, no wake-up), so a lost wake-up leaves every thread blocked and
/// shuttle reports a deadlock.
///
/// Not checked: promptness. A timed wait here always ends, so a waker that
/// should cut a pause short (a blocked waiter ending the pacing, a batch of
/// `SYNC_BATCH` bytes) can be removed without a deadlock; the unit test
/// `sync_pacing_holds_unwaited_requests_until_a_waiter_or_a_batch`, with
/// an interval of an hour, covers those.
mod wake {
    use shuttle::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use shuttle::sync::{Condvar, Mutex, MutexGuard};
    use shuttle::thread;
    use std::sync::Arc;

    #[derive(Clone, Copy, PartialEq, Debug)]
    pub enum Bug {
        None,
        /// `request_flush_lazily` never wakes the writer.
        LazyNeverWakes,
        /// `finish_write` does not wake a writer waiting for the write.
        FinishNeverWakes,
        /// `writer_waits` does not say why the writer sleeps.
        NoWaitReason,
        /// The writer goes idle without re-reading `lazy_requested` after
        /// saying it is idle: a request made in between is lost.
        NoIdleRecheck,
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    enum WriterWait {
        Busy,
        Idle,
        Write,
        Pacing,
        Window,
    }

    /// Virtual time units of the sync interval.
    const INTERVAL: u64 = 2;

    struct Stage1 {
        appended: u64,
        /// Start of the current (unsealed) chunk.
        current_start: u64,
        /// End of the sealed chunks not yet taken by a write.
        full: Option<u64>,
        flush_requested: u64,
        blocked: u32,
        writing: bool,
        writer: WriterWait,
        shutdown: bool,
        /// Virtual time: one unit per timed wait.
        now: u64,
    }

    struct Partition {
        bug: Bug,
        stage1: Mutex<Stage1>,
        lazy_requested: AtomicU64,
        writer_idle: AtomicBool,
        work: Condvar,
        durable_cv: Condvar,
        durable: AtomicU64,
    }

    impl Partition {
        fn durable(&self) -> u64 {
            self.durable.load(Ordering::SeqCst)
        }

        /// `Stream::append_frames`: returns the end position.
        fn append(&self) -> u64 {
            let mut s = self.stage1.lock().unwrap();
            s.appended += 1;
            s.appended
        }

        fn seal_current(&self, s: &mut Stage1) {
            s.full = Some(s.appended);
            s.current_start = s.appended;
        }

        fn lazy_requested(&self) -> u64 {
            self.lazy_requested.load(Ordering::SeqCst)
        }

        fn request_flush_lazily(&self, position: u64) {
            if self.lazy_requested.fetch_max(position, Ordering::SeqCst) >= position {
                return;
            }
            if self.writer_idle.load(Ordering::SeqCst) && self.bug != Bug::LazyNeverWakes {
                let s = self.stage1.lock().unwrap();
                if s.writer == WriterWait::Idle {
                    self.work.notify_one();
                }
            }
        }

        fn request_flush(&self, position: u64) {
            let mut s = self.stage1.lock().unwrap();
            if position > s.flush_requested {
                s.flush_requested = position;
                if s.writer != WriterWait::Pacing {
                    self.work.notify_one();
                }
            }
        }

        fn wait_durable(&self, position: u64) {
            if self.durable() >= position {
                return;
            }
            self.request_flush(position);
            let mut s = self.stage1.lock().unwrap();
            s.blocked += 1;
            self.work.notify_one();
            while self.durable() < position {
                s = self.durable_cv.wait(s).unwrap();
            }
            s.blocked -= 1;
        }

        /// `Stream::sync_to`: the committer writes itself unless a
        /// write is in progress.
        fn sync_to(&self, position: u64) {
            let mut s = self.stage1.lock().unwrap();
            loop {
                if self.durable() >= position {
                    return;
                }
                if !s.writing {
                    if s.appended > s.current_start {
                        self.seal_current(&mut s);
                    }
                    let end = self.begin_write(&mut s);
                    drop(s);
                    thread::yield_now(); // write and fdatasync
                    s = self.stage1.lock().unwrap();
                    self.finish_write(&mut s, end);
                    continue;
                }
                s = self.durable_cv.wait(s).unwrap();
            }
        }

        fn begin_write(&self, s: &mut Stage1) -> u64 {
            assert!(!s.writing, "one write at a time");
            s.writing = true;
            s.full.take().unwrap_or(self.durable())
        }

        fn finish_write(&self, s: &mut Stage1, end: u64) {
            self.durable.fetch_max(end, Ordering::SeqCst);
            s.writing = false;
            if s.writer == WriterWait::Write && self.bug != Bug::FinishNeverWakes {
                self.work.notify_one();
            }
            self.durable_cv.notify_all();
        }

        /// `Stream::writer_waits`: an untimed wait on `work`, or a timed
        /// one, which here ends by itself after a yield.
        fn writer_waits<'a>(
            &'a self,
            mut s: MutexGuard<'a, Stage1>,
            why: WriterWait,
            timed: bool,
        ) -> MutexGuard<'a, Stage1> {
            assert_eq!(s.writer, WriterWait::Busy);
            if self.bug != Bug::NoWaitReason {
                s.writer = why;
            }
            if timed {
                s.now += 1;
                drop(s);
                thread::yield_now();
                s = self.stage1.lock().unwrap();
            } else {
                s = self.work.wait(s).unwrap();
            }
            s.writer = WriterWait::Busy;
            s
        }

        /// `Stream::writer_loop`, with its decisions in the same order.
        fn writer_loop(&self) {
            let mut last_sync: Option<u64> = None;
            loop {
                let end = {
                    let mut s = self.stage1.lock().unwrap();
                    loop {
                        if s.writing {
                            s = self.writer_waits(s, WriterWait::Write, false);
                            continue;
                        }
                        if self.lazy_requested() > s.flush_requested && s.full.is_none() {
                            s = self.writer_waits(s, WriterWait::Window, true);
                            s.flush_requested = s.flush_requested.max(self.lazy_requested());
                            continue;
                        }
                        let batch_ready = s.full.is_some();
                        let pacing = last_sync.is_some_and(|t| s.now < t + INTERVAL);
                        if s.blocked == 0 && !s.shutdown && !batch_ready && pacing {
                            s = self.writer_waits(s, WriterWait::Pacing, true);
                            continue;
                        }
                        let wanted =
                            s.flush_requested > self.durable() && s.appended > s.current_start;
                        if wanted {
                            self.seal_current(&mut s);
                        }
                        if s.full.is_some() {
                            break;
                        }
                        if s.shutdown {
                            self.durable_cv.notify_all();
                            return;
                        }
                        if self.bug != Bug::NoWaitReason {
                            self.writer_idle.store(true, Ordering::SeqCst);
                        }
                        if self.bug == Bug::NoIdleRecheck
                            || self.lazy_requested() <= s.flush_requested
                        {
                            s = self.writer_waits(s, WriterWait::Idle, false);
                        }
                        self.writer_idle.store(false, Ordering::SeqCst);
                    }
                    last_sync = Some(s.now);
                    self.begin_write(&mut s)
                };
                thread::yield_now(); // write and fdatasync
                let mut s = self.stage1.lock().unwrap();
                self.finish_write(&mut s, end);
            }
        }
    }

    /// A pipelined committer (flush requests nobody waits for yet, then a
    /// full window's wait), a remote committer of another partition (lazy
    /// requests), and a blocking committer (`sync_to`); then the main
    /// thread waits passively until every request is durable, and shuts
    /// the writer down.
    pub fn model(bug: Bug) {
        let p = Arc::new(Partition {
            bug,
            stage1: Mutex::new(Stage1 {
                appended: 0,
                current_start: 0,
                full: None,
                flush_requested: 0,
                blocked: 0,
                writing: false,
                writer: WriterWait::Busy,
                shutdown: false,
                now: 0,
            }),
            lazy_requested: AtomicU64::new(0),
            writer_idle: AtomicBool::new(false),
            work: Condvar::new(),
            durable_cv: Condvar::new(),
            durable: AtomicU64::new(0),
        });
        let writer = {
            let p = Arc::clone(&p);
            thread::spawn(move || p.writer_loop())
        };
        let pipelined = {
            let p = Arc::clone(&p);
            thread::spawn(move || {
                let first = p.append();
                p.request_flush(first);
                let second = p.append();
                p.request_flush(second);
                p.wait_durable(first);
                let third = p.append();
                p.request_flush(third);
            })
        };
        let remote = {
            let p = Arc::clone(&p);
            thread::spawn(move || {
                for _ in 0..2 {
                    let end = p.append();
                    p.request_flush_lazily(end);
                    thread::yield_now();
                }
            })
        };
        let blocking = {
            let p = Arc::clone(&p);
            thread::spawn(move || {
                let end = p.append();
                p.sync_to(end);
                assert!(p.durable() >= end);
            })
        };
        for h in [pipelined, remote, blocking] {
            h.join().unwrap();
        }
        // Passively: no request, no wake-up of the writer.
        let mut s = p.stage1.lock().unwrap();
        let wanted = s.flush_requested.max(p.lazy_requested());
        while p.durable() < wanted {
            s = p.durable_cv.wait(s).unwrap();
        }
        s.shutdown = true;
        p.work.notify_all();
        drop(s);
        writer.join().unwrap();
    }
}

#[test]
fn writer_wake_ups_lose_no_request() {
    check(|| wake::model(wake::Bug::None));
}

/// The check can fail: a lazy request that never wakes an idle writer
/// stays pending for good.
#[test]
#[should_panic(expected = "deadlock")]
fn wake_model_catches_a_lazy_request_that_never_wakes_the_writer() {
    find_bug(|| wake::model(wake::Bug::LazyNeverWakes));
}

/// The check can fail: a writer waiting for a committer's write must be
/// woken when it ends, or a lazy request made meanwhile is lost.
#[test]
#[should_panic(expected = "deadlock")]
fn wake_model_catches_a_finished_write_that_does_not_wake_the_writer() {
    find_bug(|| wake::model(wake::Bug::FinishNeverWakes));
}

/// The check can fail: a writer that does not say it is idle is never woken
/// by a lazy request.
#[test]
#[should_panic(expected = "deadlock")]
fn wake_model_catches_a_writer_that_hides_why_it_sleeps() {
    find_bug(|| wake::model(wake::Bug::NoWaitReason));
}

/// The check can fail: a lazy request raised after the writer last looked
/// at it, but read as "not idle" by the requester, is lost unless the
/// writer looks again after announcing that it is idle.
#[test]
#[should_panic(expected = "deadlock")]
fn wake_model_catches_a_writer_that_goes_idle_without_looking_again() {
    find_bug(|| wake::model(wake::Bug::NoIdleRecheck));
}

/// A frame's writeback state (`buffer/pool/writeback.rs`), reduced to one frame with
/// the real latch: a worker modifies the page (marking it dirty first, as
/// `ExclusiveGuard::data_mut` does) while the page provider stages it
/// (shared latch, claim `writeback`, copy, clear `dirty`), writes and syncs
/// the copy, raises `persisted_gsn` and clears `writeback`
/// (`write_batch`), and tries to evict it (only clean, not in writeback,
/// exclusively latched); a checkpoint increment (`checkpoint_shard`)
/// writes the page if dirty, waits for a writeback in flight (and for the
/// latch, by revisiting the page) and writes the page again if it changed
/// meanwhile. Checks: `persisted_gsn` never
/// exceeds the synced copy; an evicted page equals its synced copy; after
/// the increment the synced copy holds every change made before it
/// started; at the end a clean page equals its synced copy.
mod writeback {
    use super::real_latch::HybridLatch;
    use shuttle::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use shuttle::sync::Mutex;
    use shuttle::thread;
    use std::sync::Arc;

    #[derive(Clone, Copy, PartialEq, Debug)]
    pub enum Bug {
        None,
        /// `dirty` cleared when the write completes instead of at staging:
        /// a change made during the write is lost.
        ClearDirtyAfterWrite,
        /// `persisted_gsn` raised before the sync returned.
        PersistBeforeSync,
        /// Eviction does not check `writeback`.
        EvictDuringWriteback,
        /// The checkpoint increment counts a page in writeback as written.
        CheckpointSkipsWriteback,
        /// The checkpoint increment reads `writeback` before `dirty`, as
        /// `checkpoint_shard` did until the model found that a page staged
        /// by the provider between the two loads passes as written.
        WritebackReadBeforeDirty,
    }

    struct Frame {
        latch: HybridLatch,
        resident: AtomicBool,
        dirty: AtomicBool,
        writeback: AtomicBool,
        persisted_gsn: AtomicU64,
        /// The page: its GSN and content (a counter), changed together.
        gsn: AtomicU64,
        content: AtomicU64,
        /// The data file: (GSN, content) written, and synced.
        written: Mutex<(u64, u64)>,
        synced: Mutex<(u64, u64)>,
        bug: Bug,
    }

    impl Frame {
        /// `ExclusiveGuard::data_mut` then the change and `logged`'s GSN.
        fn modify(&self) {
            if !self.resident.load(Ordering::SeqCst) {
                self.load();
            }
            self.latch.exclusive();
            if self.resident.load(Ordering::SeqCst) {
                self.dirty.store(true, Ordering::SeqCst);
                self.content.fetch_add(1, Ordering::SeqCst);
                self.gsn.fetch_add(1, Ordering::SeqCst);
                self.latch.unlock_exclusive();
            } else {
                self.latch.unlock_exclusive_unchanged();
                self.modify();
            }
        }

        /// A miss: read the page back from the data file.
        fn load(&self) {
            self.latch.exclusive();
            if !self.resident.load(Ordering::SeqCst) {
                let (gsn, content) = *self.synced.lock().unwrap();
                self.gsn.store(gsn, Ordering::SeqCst);
                self.content.store(content, Ordering::SeqCst);
                self.persisted_gsn.store(gsn, Ordering::SeqCst);
                self.dirty.store(false, Ordering::SeqCst);
                self.resident.store(true, Ordering::SeqCst);
                self.latch.unlock_exclusive();
            } else {
                self.latch.unlock_exclusive_unchanged();
            }
        }

        /// `BufferPool::stage`: the copy, if staged.
        fn stage(&self, wait: bool) -> Option<(u64, u64)> {
            if wait {
                self.latch.shared();
            } else if !self.latch.try_shared() {
                return None;
            }
            let staged = self.resident.load(Ordering::SeqCst)
                && self.dirty.load(Ordering::SeqCst)
                && self
                    .writeback
                    .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok();
            let copy = staged.then(|| {
                let copy = (
                    self.gsn.load(Ordering::SeqCst),
                    self.content.load(Ordering::SeqCst),
                );
                if self.bug != Bug::ClearDirtyAfterWrite {
                    self.dirty.store(false, Ordering::SeqCst);
                }
                copy
            });
            self.latch.unlock_shared();
            copy
        }

        /// `BufferPool::write_batch`: write, sync, then publish.
        fn write(&self, copy: (u64, u64)) {
            *self.written.lock().unwrap() = copy;
            if self.bug == Bug::PersistBeforeSync {
                self.persisted_gsn.fetch_max(copy.0, Ordering::SeqCst);
                self.check_persisted();
            }
            thread::yield_now(); // fdatasync
            *self.synced.lock().unwrap() = *self.written.lock().unwrap();
            if self.resident.load(Ordering::SeqCst) {
                self.persisted_gsn.fetch_max(copy.0, Ordering::SeqCst);
            }
            self.check_persisted();
            if self.bug == Bug::ClearDirtyAfterWrite {
                self.dirty.store(false, Ordering::SeqCst);
            }
            self.writeback.store(false, Ordering::SeqCst);
        }

        fn check_persisted(&self) {
            let synced = self.synced.lock().unwrap().0;
            assert!(
                self.persisted_gsn.load(Ordering::SeqCst) <= synced,
                "persisted GSN above the synced copy"
            );
        }

        /// The provider's eviction of a cool page.
        fn try_evict(&self) {
            let busy =
                self.bug != Bug::EvictDuringWriteback && self.writeback.load(Ordering::SeqCst);
            if self.dirty.load(Ordering::SeqCst) || busy || !self.latch.try_exclusive() {
                return;
            }
            let busy =
                self.bug != Bug::EvictDuringWriteback && self.writeback.load(Ordering::SeqCst);
            if self.resident.load(Ordering::SeqCst) && !self.dirty.load(Ordering::SeqCst) && !busy {
                let memory = (
                    self.gsn.load(Ordering::SeqCst),
                    self.content.load(Ordering::SeqCst),
                );
                assert_eq!(
                    memory,
                    *self.synced.lock().unwrap(),
                    "evicted a page whose changes are not on disk"
                );
                self.resident.store(false, Ordering::SeqCst);
                self.latch.unlock_exclusive();
            } else {
                self.latch.unlock_exclusive_unchanged();
            }
        }

        /// `BufferPool::stage_or_revisit`: stage and write if dirty; true if
        /// the page must be looked at again.
        fn stage_or_revisit(&self) -> bool {
            if self.bug == Bug::WritebackReadBeforeDirty {
                if self.writeback.load(Ordering::SeqCst) {
                    return true;
                }
                if !self.dirty.load(Ordering::SeqCst) {
                    return false;
                }
            } else if !self.dirty.load(Ordering::SeqCst) {
                return self.writeback.load(Ordering::SeqCst);
            }
            // No wait for the latch, as in the pool: a latched page is
            // revisited (its holder may be waiting for a frame).
            match self.stage(false) {
                Some(copy) => {
                    self.write(copy);
                    false
                }
                None => true,
            }
        }

        /// `BufferPool::checkpoint_shard` for this one frame; `gsn_min`
        /// stands for GSN_min, taken before the increment starts.
        fn checkpoint(&self) {
            let gsn_min = self.gsn.load(Ordering::SeqCst);
            let mut pending = self.stage_or_revisit();
            while pending && self.bug != Bug::CheckpointSkipsWriteback {
                thread::yield_now();
                pending = self.stage_or_revisit();
            }
            let synced = self.synced.lock().unwrap().0;
            assert!(
                synced >= gsn_min,
                "a checkpoint increment returned before the page's changes up to {gsn_min} were on disk (synced {synced})"
            );
        }
    }

    pub fn model(bug: Bug) {
        let f = Arc::new(Frame {
            latch: HybridLatch::default(),
            resident: AtomicBool::new(true),
            dirty: AtomicBool::new(false),
            writeback: AtomicBool::new(false),
            persisted_gsn: AtomicU64::new(0),
            gsn: AtomicU64::new(0),
            content: AtomicU64::new(0),
            written: Mutex::new((0, 0)),
            synced: Mutex::new((0, 0)),
            bug,
        });
        let worker = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                for _ in 0..3 {
                    f.modify();
                }
            })
        };
        let provider = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                for _ in 0..2 {
                    if let Some(copy) = f.stage(false) {
                        f.write(copy);
                    }
                    f.try_evict();
                }
            })
        };
        let checkpointer = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                f.modify();
                f.checkpoint();
            })
        };
        worker.join().unwrap();
        provider.join().unwrap();
        checkpointer.join().unwrap();
        if f.resident.load(Ordering::SeqCst)
            && !f.dirty.load(Ordering::SeqCst)
            && !f.writeback.load(Ordering::SeqCst)
        {
            let memory = (
                f.gsn.load(Ordering::SeqCst),
                f.content.load(Ordering::SeqCst),
            );
            assert_eq!(
                memory,
                *f.synced.lock().unwrap(),
                "a clean page differs from its copy on disk: a change made during writeback was lost"
            );
        }
        assert_eq!(
            f.content
                .load(Ordering::SeqCst)
                .max(f.synced.lock().unwrap().1),
            4,
            "a change was lost"
        );
    }
}

#[test]
fn writeback_state_keeps_changes_and_orders_persistence() {
    check(|| writeback::model(writeback::Bug::None));
}

/// Caught as a clean page newer than its copy on disk: evicted so (the
/// change is lost on the next read), or left so at the end.
#[test]
#[should_panic(expected = "on disk")]
fn writeback_model_catches_dirty_cleared_after_the_write() {
    find_bug(|| writeback::model(writeback::Bug::ClearDirtyAfterWrite));
}

#[test]
#[should_panic(expected = "persisted GSN above the synced copy")]
fn writeback_model_catches_persisted_gsn_raised_before_the_sync() {
    find_bug(|| writeback::model(writeback::Bug::PersistBeforeSync));
}

#[test]
#[should_panic(expected = "evicted a page whose changes are not on disk")]
fn writeback_model_catches_eviction_during_writeback() {
    find_bug(|| writeback::model(writeback::Bug::EvictDuringWriteback));
}

#[test]
#[should_panic(expected = "a checkpoint increment returned before")]
fn writeback_model_catches_a_checkpoint_that_skips_a_page_in_writeback() {
    find_bug(|| writeback::model(writeback::Bug::CheckpointSkipsWriteback));
}

/// Regression (found by this model): `checkpoint_shard` read a frame's
/// `writeback` flag before its `dirty` flag; a page the page provider
/// staged in between (clean already, its copy not yet synced) passed as
/// written, and the increment claimed the shard checkpointed. Fixed in
/// `BufferPool::stage_or_revisit` (dirty first).
#[test]
#[should_panic(expected = "a checkpoint increment returned before")]
fn writeback_model_catches_a_checkpoint_reading_writeback_before_dirty() {
    find_bug(|| writeback::model(writeback::Bug::WritebackReadBeforeDirty));
}

/// Not a check: how many schedules PCT ("p") and the random scheduler
/// ("r") need to find each broken variant, per seed ("-": not within
/// 20,000). Run with `-- --ignored --nocapture` after changing a model.
/// Scan validation against an installing writer (`model_check/scan.rs`).
#[path = "model_check/scan.rs"]
mod scan;

#[test]
fn scan_validation_catches_every_half_installed_writer() {
    check(|| scan::model(scan::Order::StripesThenRescan));
    check(|| scan::model(scan::Order::PerKeyStripeThenTid));
}

#[test]
#[should_panic(expected = "half a transfer")]
fn scan_model_catches_the_rescan_before_the_stripes() {
    find_bug(|| scan::model(scan::Order::RescanThenStripes));
}

#[test]
#[should_panic(expected = "half a transfer")]
fn scan_model_catches_a_point_read_checking_its_tid_before_its_stripe() {
    find_bug(|| scan::model(scan::Order::PerKeyTidThenStripe));
}

#[test]
#[ignore]
fn explore_budgets() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    std::env::set_var(shuttle::SILENCE_WARNINGS, "1");
    static N: AtomicUsize = AtomicUsize::new(0);
    let cases: Vec<(&str, Model)> = vec![
        (
            "reserved",
            Arc::new(|| commit::model(commit::Bug::NoReservedFlag, &commit::RESERVED)),
        ),
        (
            "tid",
            Arc::new(|| commit::model(commit::Bug::NoTidCheck, &commit::READ)),
        ),
        (
            "pipeline",
            Arc::new(|| commit::model(commit::Bug::NoPipelineCarry, &commit::PIPELINE)),
        ),
        (
            "norfa",
            Arc::new(|| commit::model(commit::Bug::NoRemoteFlush, &commit::MIXED)),
        ),
        (
            "skipval",
            Arc::new(|| latch::model(latch::Bug::SkipValidation)),
        ),
        (
            "unchanged",
            Arc::new(|| latch::model(latch::Bug::ReleaseUnchanged)),
        ),
        (
            "dirtyafter",
            Arc::new(|| writeback::model(writeback::Bug::ClearDirtyAfterWrite)),
        ),
        (
            "persist",
            Arc::new(|| writeback::model(writeback::Bug::PersistBeforeSync)),
        ),
        (
            "evict",
            Arc::new(|| writeback::model(writeback::Bug::EvictDuringWriteback)),
        ),
        (
            "ckptskip",
            Arc::new(|| writeback::model(writeback::Bug::CheckpointSkipsWriteback)),
        ),
        (
            "ckptorder",
            Arc::new(|| writeback::model(writeback::Bug::WritebackReadBeforeDirty)),
        ),
        (
            "lazywake",
            Arc::new(|| wake::model(wake::Bug::LazyNeverWakes)),
        ),
        (
            "finishwake",
            Arc::new(|| wake::model(wake::Bug::FinishNeverWakes)),
        ),
        (
            "waitreason",
            Arc::new(|| wake::model(wake::Bug::NoWaitReason)),
        ),
        (
            "idlerecheck",
            Arc::new(|| wake::model(wake::Bug::NoIdleRecheck)),
        ),
    ];
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for (name, f) in cases {
        let mut found = Vec::new();
        for seed in 0..8u64 {
            for pct in [false, true] {
                N.store(0, Ordering::SeqCst);
                let g = Arc::clone(&f);
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let body = move || {
                        N.fetch_add(1, Ordering::SeqCst);
                        g()
                    };
                    if pct {
                        shuttle::Runner::new(
                            shuttle::scheduler::PctScheduler::new_from_seed(seed, 3, 20_000),
                            shuttle::Config::default(),
                        )
                        .run(body);
                    } else {
                        shuttle::Runner::new(
                            shuttle::scheduler::RandomScheduler::new_from_seed(seed, 20_000),
                            shuttle::Config::default(),
                        )
                        .run(body);
                    }
                }));
                found.push(format!(
                    "{}{}",
                    if pct { "p" } else { "r" },
                    if r.is_err() {
                        N.load(Ordering::SeqCst).to_string()
                    } else {
                        "-".into()
                    }
                ));
            }
        }
        eprintln!("{name}: {}", found.join(" "));
    }
    std::panic::set_hook(prev);
}

/// The quiesce lock (`txn/quiesce.rs`), the real type: two sessions (in
/// different stripes) and a thread without a slot take the shared side
/// around a "commit" while a writer (a clean close or DDL) takes the
/// exclusive side; no commit may be inside while the writer is.
mod quiesce {
    use super::real_quiesce::Quiesce;
    use shuttle::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use shuttle::thread;
    use std::sync::Arc;

    #[derive(Default)]
    struct Shared {
        inside: AtomicU64,
        exclusive: AtomicBool,
    }

    fn commit(s: &Shared) {
        s.inside.fetch_add(1, Ordering::SeqCst);
        assert!(
            !s.exclusive.load(Ordering::SeqCst),
            "a commit ran while the writer held the lock"
        );
        thread::yield_now();
        s.inside.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn model(broken: bool) {
        let q = Arc::new(if broken {
            Quiesce::broken_without_drain_for_tests()
        } else {
            Quiesce::default()
        });
        let s = Arc::new(Shared::default());
        let mut threads = Vec::new();
        for slot in 0..2u16 {
            let (q, s) = (Arc::clone(&q), Arc::clone(&s));
            threads.push(thread::spawn(move || {
                for _ in 0..2 {
                    let _read = q.read_as(slot);
                    commit(&s);
                }
            }));
        }
        {
            let (q, s) = (Arc::clone(&q), Arc::clone(&s));
            threads.push(thread::spawn(move || {
                let _read = q.read();
                commit(&s);
            }));
        }
        {
            let (q, s) = (Arc::clone(&q), Arc::clone(&s));
            threads.push(thread::spawn(move || {
                let _exclusive = q.write();
                s.exclusive.store(true, Ordering::SeqCst);
                assert_eq!(
                    s.inside.load(Ordering::SeqCst),
                    0,
                    "a commit ran while the writer held the lock"
                );
                thread::yield_now();
                s.exclusive.store(false, Ordering::SeqCst);
            }));
        }
        for t in threads {
            t.join().expect("no thread panics");
        }
    }
}

#[test]
fn quiesce_lock_keeps_commits_out_while_held_exclusively() {
    check(|| quiesce::model(false));
}

/// The check can fail: a writer that does not wait for the sessions
/// already inside is caught.
#[test]
#[should_panic(expected = "while the writer held the lock")]
fn quiesce_model_catches_a_writer_that_does_not_drain_the_sessions() {
    find_bug(|| quiesce::model(true));
}
