//! One log partition of the per-worker WAL: the log of one session slot
//! (seed 000 §3.1, Fig. 2), a [`Stream`] with the session's GSN clock.
//!
//! The stream (stage-1 chunk ring, writer thread with sync pacing,
//! segment files, pruning, failure handling) is the scheme-neutral
//! [`crate::logstore::stream`]; a partition is that stream (it derefs to
//! it) plus what is the WAL's: the GSN clock the owner reserves its
//! records' GSNs from, and GSN_flushed ([`Partition::flushed_gsn`]), the
//! GSN below which the partition vouches every record durable. A record's
//! GSN is its mark in the stream (so pruning below a GSN retires whole
//! segments), and a commit record's TID its note (so the partition knows
//! its newest durable commit).
//!
//! Invariants: records are appended in GSN order; no future record of the
//! partition has a GSN at or below the clock while no reservation is
//! pending; [`Partition::flushed_gsn`] never vouches for a GSN whose record
//! is not durable.

use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos, Tid};
use crate::io::Storage;
use crate::logstore::stream::Stream;
use crate::persist::SchemeKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bit of `Partition::clock` set while a reserved GSN's record is not yet
/// appended.
const RESERVED: u64 = 1 << 63;
/// GSNs stay below the reservation bit; recovery refuses a log record at
/// or above it as corruption.
pub const MAX_GSN: Gsn = Gsn::new(RESERVED);

/// Directory of partition `id` below the log directory.
pub fn partition_dir(log_dir: &Path, id: u32) -> PathBuf {
    log_dir.join(format!("p{id:05}"))
}

/// Aligned to its own cache lines: other sessions clone and drop `Arc`s of
/// it for every commit that depends on it, and the reference counts must
/// not share a line with the clock the owner writes for every record.
#[repr(align(128))]
pub struct Partition {
    stream: Arc<Stream>,
    /// The session's GSN clock: no future record of this partition has a
    /// GSN below it, and none at it unless bit 63 ([`RESERVED`]) is set.
    /// That bit is set while GSNs handed out by `reserve_gsns` have no
    /// appended records yet; the clock then equals the first of them (so
    /// `Wal::checkpoint_gsn`, the smallest clock minus one, stays below
    /// every one) and `flushed_gsn` must not vouch for it. One word for
    /// both, so that other sessions' `flushed_gsn` (once per writing
    /// transaction, on every partition) takes no lock the owner and the
    /// writer contend for, and the owner's append pays one atomic operation
    /// for the flag.
    clock: AtomicU64,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Partition({} at {})", self.id(), self.dir().display())
    }
}

/// A partition is its stream: durability, flush requests, waits, pruning,
/// health and statistics are the stream's.
impl std::ops::Deref for Partition {
    type Target = Stream;

    #[inline]
    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl Partition {
    /// Open partition `id` whose existing log ends at `end` (found by
    /// recovery; the next record goes there) with GSN clock `clock`, and
    /// start its writer thread. Existing segments, as (start, length, max
    /// GSN), are kept for pruning.
    pub fn open(
        storage: Arc<dyn Storage>,
        log_dir: &Path,
        id: u32,
        end: LogPos,
        clock: Gsn,
        existing: Vec<(LogPos, u64, Gsn)>,
    ) -> Result<Arc<Self>> {
        Self::open_for(SchemeKind::PerWorker, storage, log_dir, id, end, clock, existing)
    }

    /// [`Partition::open`] for `scheme`'s log (its segments' tag).
    pub fn open_for(
        scheme: SchemeKind,
        storage: Arc<dyn Storage>,
        log_dir: &Path,
        id: u32,
        end: LogPos,
        clock: Gsn,
        existing: Vec<(LogPos, u64, Gsn)>,
    ) -> Result<Arc<Self>> {
        let dir = partition_dir(log_dir, id);
        if clock >= MAX_GSN {
            // Recovery refuses such records; only a damaged checkpoint
            // floor could still bring one here.
            return Err(Error::Corruption {
                path: dir,
                offset: 0,
                detail: format!("log clock {clock} is beyond the GSN range"),
            });
        }
        // Every record at or below the clock is durable (recovered): it is
        // the stream's durable mark.
        let marks = existing
            .into_iter()
            .map(|(start, len, max_gsn)| (start, len, max_gsn.get()))
            .collect();
        let stream = Stream::open(
            storage,
            dir,
            scheme,
            id,
            end,
            clock.get(),
            marks,
        )?;
        Ok(Arc::new(Partition {
            stream,
            clock: AtomicU64::new(clock.get()),
        }))
    }

    #[inline]
    pub fn clock(&self) -> Gsn {
        Gsn::new(self.clock.load(Ordering::Acquire) & !RESERVED)
    }

    /// The GSN for the owner's next record: above `floor` (the txn GSN and
    /// the page GSN) and above the clock.
    pub fn reserve_gsn(&self, floor: Gsn) -> Gsn {
        self.reserve_gsns(floor, 1)
    }

    /// `count` consecutive GSNs for the records of one structure
    /// modification; returns the first. Until `append_group` appends their
    /// records the clock holds the first of them with `RESERVED` set.
    pub fn reserve_gsns(&self, floor: Gsn, count: u64) -> Gsn {
        assert!(
            count > 0 && floor.get() < MAX_GSN.get() - count,
            "GSNs above {floor} out of range"
        );
        let floor = floor.get();
        let mut first = 0;
        let _ = self
            .clock
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                // Still set if the last reservation's append failed: the
                // partition is then stopped and vouches for nothing more.
                first = floor.max(word & !RESERVED) + 1;
                Some(first | RESERVED)
            });
        Gsn::new(first)
    }

    /// Every record of this partition with a GSN at or below the result is
    /// durable, and every later record will have a larger GSN. An idle,
    /// fully durable partition has its clock raised to `global` first (its
    /// future records then order above it), so idle partitions do not hold
    /// GSN_flushed back.
    ///
    /// Why no lock is needed: the value vouched for is a clock word read
    /// (or compare-and-swapped) without `RESERVED`. A reservation later
    /// in the word's modification order starts from that value or above,
    /// so its GSNs lie above it. One earlier was cleared by its append,
    /// which stored `appended` before releasing the word: having acquired
    /// the word, this call sees those bytes, and vouches only if they are
    /// durable. A compare-and-swap that fails because the owner moved the
    /// word starts over from the new word.
    ///
    /// This relies on the word's value never repeating (its GSN part only
    /// grows, and each reservation raises it), so a successful
    /// compare-and-swap means nothing touched the word since it was read.
    /// Every change is a read-modify-write with release semantics, except
    /// the append that clears a reservation: a plain release store, made
    /// while no other thread can change the word (this call does not swap
    /// a word with `RESERVED`, and a swap of an older word fails). A call
    /// that acquires its value, or the value of a later swap (acquire and
    /// release), so sees the appended bytes.
    pub fn flushed_gsn(&self, global: Gsn) -> Gsn {
        let mut word = self.clock.load(Ordering::Acquire);
        loop {
            if word & RESERVED != 0 || !self.all_durable() {
                return Gsn::new(self.durable_mark());
            }
            let raised = word.max(global.get());
            if raised == word {
                return Gsn::new(word);
            }
            match self.clock.compare_exchange_weak(
                word,
                raised,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Gsn::new(raised),
                Err(now) => word = now,
            }
        }
    }

    /// Append one encoded record with GSN `gsn`; returns the stream
    /// position after it. Only the owning session appends.
    #[inline]
    pub fn append(&self, record: &[u8], gsn: Gsn) -> Result<LogPos> {
        self.append_group(record, 1, gsn)
    }

    /// Append `count` encoded records whose largest GSN is `max_gsn` as one
    /// unit: the stream writes and syncs all of them or none, and the
    /// durable position never falls between them (a structure modification
    /// is durable whole or not at all).
    #[inline]
    pub fn append_group(&self, records: &[u8], count: u64, max_gsn: Gsn) -> Result<LogPos> {
        debug_assert!(max_gsn > Gsn::ZERO && max_gsn < MAX_GSN);
        let end = self.stream.append_frames(records, count, max_gsn.get())?;
        self.appended_through(max_gsn);
        Ok(end)
    }

    /// For a central log's consolidation array: `count` consecutive GSNs
    /// above `floor` and, for them, `len_of(first GSN)` bytes of the
    /// stream, reserved as one unit (the records are filled in later,
    /// [`crate::logstore::stream::Reserved::fill`]). The clock moves past
    /// them at once: their positions are fixed, `appended` covers them,
    /// and nothing vouches for them before the stream is durable through
    /// them, which waits for their fill. Returns the first GSN even when
    /// the stream refuses the bytes (then stopped: it never becomes
    /// durable up to that GSN).
    pub fn reserve_group(
        &self,
        floor: Gsn,
        count: u64,
        len_of: impl FnOnce(Gsn) -> usize,
    ) -> (Gsn, Result<crate::logstore::stream::Reserved>) {
        let first = self.reserve_gsns(floor, count);
        let last = first.plus(count - 1);
        let reserved = self.stream.reserve(len_of(first), count, last.get());
        if reserved.is_ok() {
            self.appended_through(last);
        }
        (first, reserved)
    }

    /// The records up to `max_gsn` now have their places in the stream:
    /// clear the reservation flag and move the clock to `max_gsn`.
    #[inline]
    fn appended_through(&self, max_gsn: Gsn) {
        let max_gsn = max_gsn.get();
        // After `appended` moved: whoever acquires the word without the
        // reservation sees the bytes too (see `flushed_gsn`).
        let word = self.clock.load(Ordering::Relaxed);
        if word & RESERVED != 0 {
            debug_assert!(max_gsn >= word & !RESERVED, "appends the reserved GSNs");
            // Set by this thread's `reserve_gsns`, and while it is set no
            // other thread changes the word: a plain store, no locked
            // compare-and-swap (one per record, each waiting for the
            // record's stores to drain).
            self.clock
                .store((word & !RESERVED).max(max_gsn), Ordering::Release);
        } else {
            // An append without a reservation (tests): `flushed_gsn` may
            // raise the word meanwhile.
            let _ = self
                .clock
                .fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
                    Some((word & !RESERVED).max(max_gsn))
                });
        }
    }

    /// Remember that the commit record of `tid` ends at `end`.
    #[inline]
    pub fn note_commit(&self, tid: Tid, end: LogPos) {
        self.note_at(end, tid.get());
    }

    /// [`Partition::note_commit`], and if `request` a flush request up to
    /// `end`, under one lock.
    #[inline]
    pub fn note_commit_and_request(&self, tid: Tid, end: LogPos, request: bool) {
        self.note_at_and_request(end, tid.get(), request);
    }

    /// A remote-dependent commit is durable only once its dependencies are:
    /// its session reports it after waiting for them.
    #[inline]
    pub fn mark_commit_durable(&self, tid: Tid) {
        self.raise_note(tid.get());
    }

    /// TID of the newest durable commit of this partition: every commit of
    /// this session with a TID at or below it is durable.
    #[inline]
    pub fn durable_commit_tid(&self) -> Tid {
        Tid::new(self.durable_note())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;
    use crate::logstore::segment;
    use crate::wal::record::{self, RecordBody, RecordHeader};
    use std::sync::atomic::AtomicBool;

    fn rec(gsn: Gsn, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        record::encode(
            &RecordHeader {
                gsn,
                txn: 1,
                page: 7,
                prev_gsn: gsn.prev_or_zero(),
                compensation: false,
                ..Default::default()
            },
            &RecordBody::Insert {
                key: b"k",
                value: payload,
            },
            &mut out,
        );
        out
    }

    /// A simulated disk with an empty log directory `/db/wal`, durable
    /// (as `Wal::new` leaves it).
    fn sim_log(seed: u64) -> (SimStorage, &'static Path) {
        let sim = SimStorage::new(seed);
        let log_dir = Path::new("/db/wal");
        sim.create_dir_all(log_dir).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        sim.sync_dir(Path::new("/db")).unwrap();
        (sim, log_dir)
    }

    /// Partition 0, empty, in `/db/wal` on a fresh `sim_log(seed)`.
    fn empty_partition(seed: u64) -> (SimStorage, Arc<Partition>) {
        let (sim, log_dir) = sim_log(seed);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let p = Partition::open(storage, log_dir, 0, LogPos::ZERO, Gsn::ZERO, Vec::new()).unwrap();
        (sim, p)
    }

    /// GSN_flushed follows durability: it reaches a record's GSN once the
    /// record is durable, an idle partition follows the global clock, and
    /// a reserved GSN or a record not yet durable caps it.
    #[test]
    fn flushed_gsn_follows_durability_and_reservations() {
        let (_sim, p) = empty_partition(3);
        for n in 1..=100 {
            let gsn = Gsn::new(n);
            let end = p.append(&rec(gsn, &[n as u8; 300]), gsn).unwrap();
            if n % 10 == 0 {
                p.wait_durable(end).unwrap();
                assert!(p.flushed_gsn(Gsn::ZERO) >= gsn);
            }
        }
        assert_eq!(p.flushed_gsn(Gsn::ZERO), Gsn::new(100));
        assert_eq!(
            p.flushed_gsn(Gsn::new(150)),
            Gsn::new(150),
            "an idle partition follows the global clock"
        );
        let gsn = p.reserve_gsn(Gsn::ZERO);
        assert_eq!(gsn, Gsn::new(151));
        assert_eq!(
            p.flushed_gsn(Gsn::new(200)),
            Gsn::new(100),
            "a reserved GSN caps flushed_gsn"
        );
        p.append(&rec(gsn, b"unsynced"), gsn).unwrap();
        assert_eq!(
            p.flushed_gsn(Gsn::new(200)),
            Gsn::new(100),
            "a pending record caps flushed_gsn"
        );
    }

    /// `Wal::checkpoint_gsn` takes the smallest clock minus one as the GSN
    /// below which every record is already logged. While a structure
    /// modification's GSNs are reserved and not yet appended, the clock
    /// must therefore stay at the first of them, not the last.
    #[test]
    fn a_reserved_group_holds_the_clock_at_its_first_gsn() {
        let (sim, log_dir) = sim_log(11);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let p = Partition::open(storage, log_dir, 0, LogPos::ZERO, Gsn::new(10), Vec::new()).unwrap();
        let first = p.reserve_gsns(Gsn::new(20), 3);
        assert_eq!(first, Gsn::new(21));
        assert_eq!(p.clock(), first, "the group's records are not appended");
        assert_eq!(
            p.flushed_gsn(Gsn::new(100)),
            Gsn::new(10),
            "nothing vouched for while reserved"
        );
        let mut group = Vec::new();
        for i in 0..3 {
            group.extend_from_slice(&rec(first.plus(i), b"smo"));
        }
        p.append_group(&group, 3, first.plus(2)).unwrap();
        assert_eq!(p.clock(), first.plus(2));
        assert_eq!(p.reserve_gsn(Gsn::ZERO), first.plus(3));
    }

    /// `flushed_gsn` (other sessions) and `reserve_gsns` (the owner) take
    /// no common lock: a GSN the owner reserves must still lie above every
    /// value `flushed_gsn` vouched for while the GSN's record was not yet
    /// appended.
    #[test]
    fn flushed_gsn_never_vouches_for_a_reserved_gsn() {
        let (_sim, p) = empty_partition(10);
        p.set_sync_interval(std::time::Duration::ZERO);
        let vouched = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        // Stops the checker however the owner's loop ends (a failed
        // assertion must fail the test, not leave the scope waiting).
        struct Done<'a>(&'a AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|scope| {
            let _done = Done(&done);
            scope.spawn(|| {
                let mut global = 0;
                while !done.load(Ordering::Relaxed) {
                    // Other sessions' clocks run ahead of this one.
                    global += 3;
                    vouched.fetch_max(p.flushed_gsn(Gsn::new(global)).get(), Ordering::SeqCst);
                }
            });
            for i in 0..20_000u64 {
                let gsn = p.reserve_gsn(Gsn::ZERO);
                let end = p.append(&rec(gsn, b"v"), gsn).unwrap();
                // Until the record is durable nothing may vouch for its
                // GSN; the yield lets a racing checker publish what it got.
                std::thread::yield_now();
                let seen = vouched.load(Ordering::SeqCst);
                assert!(
                    seen < gsn.get() || p.durable() >= end,
                    "GSN {gsn} not durable, yet {seen} was vouched for"
                );
                // Often durable (and idle) again, so the vouching path runs.
                if i % 2 == 0 {
                    p.sync_to(end).unwrap();
                }
            }
        });
    }

    /// A clean close deletes the segments of a partition that recovery
    /// found but no session reopened (`Wal::remove_all_segments`) oldest
    /// first, one directory sync per deletion, like `prune_below`: with a
    /// single sync at the end, a crash could keep the deletion of a middle
    /// segment only, and recovery refuses the gap (found in review).
    #[test]
    fn a_clean_close_deletes_an_unopened_partitions_segments_one_at_a_time() {
        let (sim, log_dir) = sim_log(15);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 7, LogPos::ZERO, Gsn::ZERO, Vec::new()).unwrap();
        p.set_preallocate(false);
        p.set_segment_size(1000);
        for gsn in (1..=4).map(Gsn::new) {
            let end = p.append(&rec(gsn, &[7; 1000]), gsn).unwrap();
            p.wait_durable(end).unwrap();
        }
        p.shutdown().unwrap();
        let dir = partition_dir(log_dir, 7);
        let segments = segment::list_segments(&sim, &dir).unwrap().len();
        assert!(segments >= 3, "{segments} segments");
        // A log that recovered partition 7 and never reopened it.
        let wal = crate::wal::Wal::new(
            Arc::new(sim.clone()),
            log_dir,
            crate::wal::CommitProtocol::Rfa,
            Vec::new(),
            Gsn::ZERO,
        )
        .unwrap();
        let syncs = sim.stats().dir_syncs;
        wal.remove_all_segments().unwrap();
        assert!(segment::list_segments(&sim, &dir).unwrap().is_empty());
        let synced = sim.stats().dir_syncs - syncs;
        assert!(
            synced >= segments as u64,
            "{synced} directory syncs for {segments} deleted segments"
        );
    }
}
