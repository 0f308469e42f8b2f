//! The stream's behaviour on a simulated disk, with test records
//! (`logstore::test_support`) whose numbers stand for the marks a scheme
//! appends (the WAL's GSNs).

use super::*;
use crate::io::{CrashPolicy, OpenMode, SimStorage};
use crate::logstore::scan::{scan, ScanEnd};
use crate::logstore::segment::{self, segment_name};
use crate::logstore::test_support::{frame, numbered, TestRecords};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Test record `n` as a sealed frame, its payload as long as `payload`.
pub(super) fn rec(n: u64, payload: &[u8]) -> Vec<u8> {
    frame(0, &numbered(n, payload.len()))
}

/// The directory of stream `id` below `log_dir`.
pub(super) fn stream_dir(log_dir: &Path, id: u32) -> PathBuf {
    log_dir.join(format!("s{id:05}"))
}

/// Open stream `id` below `log_dir` (the per-worker scheme's tag).
pub(super) fn open_stream(
    storage: Arc<dyn Storage>,
    log_dir: &Path,
    id: u32,
    end: LogPos,
    mark: u64,
    existing: Vec<(LogPos, u64, u64)>,
) -> Result<Arc<Stream>> {
    let dir = stream_dir(log_dir, id);
    Stream::open(storage, dir, SchemeKind::PerWorker, id, end, mark, existing)
}

/// A simulated disk with an empty, durable log directory `/db/log`.
pub(super) fn sim_log(seed: u64) -> (SimStorage, &'static Path) {
    sim_log_direct(seed, false)
}

/// Stream 0, empty, in `/db/log` on a fresh `sim_log(seed)`.
pub(super) fn empty_stream(seed: u64) -> (SimStorage, Arc<Stream>) {
    let (sim, log_dir) = sim_log(seed);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let p = open_stream(storage, log_dir, 0, LogPos::ZERO, 0, Vec::new()).unwrap();
    (sim, p)
}

/// Like `sim_log`, with log files that behave as `O_DIRECT` ones when
/// `direct` (every write whole aligned blocks, or `EINVAL`).
fn sim_log_direct(seed: u64, direct: bool) -> (SimStorage, &'static Path) {
    let sim = SimStorage::new(seed);
    sim.set_direct_log(direct);
    let log_dir = Path::new("/db/log");
    sim.create_dir_all(log_dir).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    sim.sync_dir(Path::new("/db")).unwrap();
    (sim, log_dir)
}

/// Wait (at most 30 s) until the stream's spare is ready.
fn wait_for_spare(p: &Stream) {
    let t0 = std::time::Instant::now();
    while !p.files.spare.is_ready() {
        assert!(t0.elapsed().as_secs() < 30, "no spare was prepared");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The numbers of the records in the segments of `dir`, in stream order.
pub(super) fn read_log(sim: &SimStorage, dir: &Path) -> Vec<u64> {
    let mut numbers = Vec::new();
    for (start, seg) in segment::list_segments(sim, dir).unwrap() {
        let bytes = sim.read_current(&seg).unwrap();
        let frames = &bytes[segment::HEADER_SIZE as usize..];
        let scan = scan::<TestRecords>(frames, start);
        assert!(matches!(
            scan.end,
            ScanEnd::Clean | ScanEnd::TornTail { .. }
        ));
        numbers.extend(scan.records.iter().map(|(_, r)| r.n));
    }
    numbers
}

/// Poll until `p` is durable up to `end`, for at most `limit`.
pub(super) fn durable_within(p: &Stream, end: LogPos, limit: std::time::Duration) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        if p.durable() >= end {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    p.durable() >= end
}

/// Sync pacing: within the interval after a sync, a flush request that
/// nobody waits on is held back; a blocked waiter or a batch of
/// `SYNC_BATCH` bytes has the writer sync at once, and a blocking
/// committer (`sync_to`) syncs itself. The interval here is an hour, so
/// a stream that ignored any rule fails the test instead of passing
/// it by luck.
#[test]
fn sync_pacing_holds_unwaited_requests_until_a_waiter_or_a_batch() {
    let (_sim, p) = empty_stream(8);
    p.set_sync_interval(std::time::Duration::from_secs(3600));
    // The simulated disk syncs in microseconds: a request's patience
    // would end every pause at once (its own test is below).
    p.set_sync_patience(0);
    let mut n = 1;
    let mut append = |bytes: usize| {
        let end = p.append_frames(&rec(n, &vec![7; bytes]), 1, n).unwrap();
        n += 1;
        end
    };
    // The first sync has no predecessor to pace against.
    let first = append(100);
    p.request_flush(first);
    assert!(durable_within(
        &p,
        first,
        std::time::Duration::from_secs(60)
    ));
    let syncs = p.stats().syncs;
    // A small request nobody waits on stays pending.
    let small = append(100);
    p.request_flush(small);
    assert!(!durable_within(
        &p,
        small,
        std::time::Duration::from_millis(200)
    ));
    assert_eq!(p.stats().syncs, syncs, "no sync within the interval");
    // A waiter ends the pause.
    // (A detached thread: if the rule were broken it would block for the
    // hour, and the assertion below must fail rather than wait for it.)
    let waiter = {
        let p = Arc::clone(&p);
        std::thread::spawn(move || p.wait_durable(small))
    };
    assert!(durable_within(
        &p,
        small,
        std::time::Duration::from_secs(60)
    ));
    waiter.join().unwrap().unwrap();
    assert_eq!(p.stats().syncs, syncs + 1);
    assert_eq!(
        p.stats().committer_syncs,
        0,
        "the writer synced for the waiter"
    );
    // A blocking committer does not wait for the writer: it syncs itself.
    let own = append(100);
    p.sync_to(own).unwrap();
    assert!(p.durable() >= own);
    assert_eq!(p.stats().syncs, syncs + 2);
    assert_eq!(p.stats().committer_syncs, 1, "the committer's own sync");
    // A batch of SYNC_BATCH bytes ends it too, without a waiter: one
    // request, held, then appends (not requested) that reach the batch.
    let requested = append(100);
    p.request_flush(requested);
    let mut end = requested;
    while end.bytes_since(own) + 4100 < SYNC_BATCH as u64 {
        end = append(4000);
    }
    assert!(!durable_within(
        &p,
        requested,
        std::time::Duration::from_millis(200)
    ));
    append(4000);
    assert!(durable_within(
        &p,
        requested,
        std::time::Duration::from_secs(60)
    ));
    // So does a batch of SYNC_REQUESTS requests (small commits gather far
    // faster than SYNC_BATCH bytes), and one request fewer does not.
    let syncs = p.stats().syncs;
    let mut last = requested;
    for _ in 0..SYNC_REQUESTS - 1 {
        last = append(100);
        p.request_flush(last);
    }
    assert!(!durable_within(
        &p,
        last,
        std::time::Duration::from_millis(200)
    ));
    assert_eq!(p.stats().syncs, syncs, "no sync for one request fewer");
    let last = append(100);
    p.request_flush(last);
    assert!(durable_within(&p, last, std::time::Duration::from_secs(60)));
}

/// A pacing pause ends once the oldest waiting request has waited
/// `SYNC_PATIENCE` times what the writer's syncs take, however long the
/// interval: a lone pipelined commit is durable within a few syncs, not
/// at the interval's end; but not while the process keeps the cores
/// busy. The interval here is an hour.
#[test]
fn a_paced_request_waits_only_a_few_syncs_unless_the_cores_are_busy() {
    let (_sim, p) = empty_stream(10);
    p.set_sync_interval(std::time::Duration::from_secs(3600));
    // Whatever else runs beside the test: never busy.
    p.set_busy_cpu_share(f64::INFINITY);
    let mut n = 1;
    let mut append = || {
        let end = p.append_frames(&rec(n, &[7; 100]), 1, n).unwrap();
        n += 1;
        end
    };
    // The first sync has no predecessor to pace against; it measures
    // what a sync takes.
    let first = append();
    p.request_flush(first);
    assert!(durable_within(
        &p,
        first,
        std::time::Duration::from_secs(60)
    ));
    // Within the interval, nobody waiting, no batch: the request's
    // patience alone ends the pause (a sync on the simulated disk takes
    // microseconds).
    for _ in 0..3 {
        let end = append();
        p.request_flush(end);
        assert!(durable_within(
            &p,
            end,
            std::time::Duration::from_secs(60)
        ));
    }
    let stats = p.stats();
    assert_eq!(stats.committer_syncs, 0, "the writer synced each");
    assert_eq!(stats.syncs, 4);
    // Busy (a share of 0 always is): the interval paces again.
    p.set_busy_cpu_share(0.0);
    let held = append();
    p.request_flush(held);
    assert!(!durable_within(
        &p,
        held,
        std::time::Duration::from_millis(300)
    ));
    assert_eq!(p.stats().syncs, 4, "no sync within the interval");
}

#[test]
fn lazy_requests_wake_an_idle_writer_but_not_a_pacing_one() {
    let (_sim, p) = empty_stream(9);
    let mut n = 1;
    let mut append = || {
        let end = p.append_frames(&rec(n, &[7; 100]), 1, n).unwrap();
        n += 1;
        end
    };
    // Without pacing an idle writer must be woken: nobody else would
    // make a lazy (group) request durable.
    p.set_sync_interval(std::time::Duration::ZERO);
    let first = append();
    p.request_flush_lazily(first);
    assert!(durable_within(
        &p,
        first,
        std::time::Duration::from_secs(60)
    ));
    // Pacing for an hour after the next sync: a stream of lazy requests
    // (RFA's remote commits) joins the pause instead of waking the
    // writer for each one.
    p.set_sync_interval(std::time::Duration::from_secs(3600));
    let second = append();
    p.wait_durable(second).unwrap();
    // The writer may have gone idle rather than pacing (if it looked
    // before the waiter left); then the first lazy request would wake
    // it, and its group window's end would count as a second wake-up.
    // An eager request puts an idle writer into the pause too.
    let third = append();
    p.request_flush(third);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let woken = p.stats().writer_wakeups;
    let mut last = second;
    // 100 records stay below SYNC_BATCH, which would end the pause.
    for _ in 0..100 {
        last = append();
        p.request_flush_lazily(last);
        std::thread::yield_now();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    let extra = p.stats().writer_wakeups - woken;
    assert!(
        extra <= 1,
        "the writer woke {extra} times for lazy requests"
    );
    assert!(p.durable() < last, "they wait for the pause to end");
    // A blocked waiter still ends the pause.
    let waiter = {
        let p = Arc::clone(&p);
        std::thread::spawn(move || p.wait_durable(last))
    };
    assert!(durable_within(&p, last, std::time::Duration::from_secs(60)));
    waiter.join().unwrap().unwrap();
}

/// Lazy requests take no lock unless the writer is idle: each must
/// still reach a writer that is going idle just then. Requests come
/// at varying delays after the previous sync, so that some land while
/// the writer checks for work; a lost wake-up leaves one never durable
/// (nothing else wakes an idle writer).
#[test]
fn every_lazy_request_reaches_a_writer_going_idle() {
    let (_sim, p) = empty_stream(11);
    p.set_sync_interval(std::time::Duration::ZERO);
    let mut rng = StdRng::seed_from_u64(11);
    for n in 1..=400u64 {
        let end = p.append_frames(&rec(n, &[3; 40]), 1, n).unwrap();
        for _ in 0..rng.gen_range(0..2000) {
            std::hint::spin_loop();
        }
        p.request_flush_lazily(end);
        let t0 = std::time::Instant::now();
        while p.durable() < end {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "lazy request {n} never made durable"
            );
            std::thread::yield_now();
        }
    }
}

/// Blocking committers (`sync_to`) write and sync the log themselves
/// while the writer serves the appender's flush requests and waiters.
/// Whoever writes, one write runs at a time and starts at the durable
/// position (`write_chunks` asserts it), so the segments hold every
/// record once and in order. Small segments make writes roll over too.
#[test]
fn committers_and_the_writer_take_turns_and_keep_the_stream_in_order() {
    let (sim, p) = empty_stream(10);
    p.set_sync_interval(std::time::Duration::ZERO);
    p.set_segment_size(16 << 10);
    const RECORDS: u64 = 3000;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !stop.load(Ordering::Acquire) {
                    p.sync_to(p.appended()).unwrap();
                    std::thread::yield_now();
                }
            });
        }
        for n in 1..=RECORDS {
            let end = p.append_frames(&rec(n, &[n as u8; 50]), 1, n).unwrap();
            if n % 3 == 0 {
                p.request_flush(end);
            }
            if n % 50 == 0 {
                p.sync_to(end).unwrap();
            }
            if n % 70 == 0 {
                p.wait_durable(end).unwrap();
            }
            if n % 100 == 10 {
                // Room for the writer to serve the requests.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        stop.store(true, Ordering::Release);
    });
    p.wait_durable(p.appended()).unwrap();
    let stats = p.stats();
    assert!(stats.committer_syncs > 0, "{stats:?}");
    assert!(
        stats.syncs > stats.committer_syncs,
        "the writer synced too: {stats:?}"
    );
    assert_eq!(read_log(&sim, &p.dir), (1..=RECORDS).collect::<Vec<_>>());
}

#[test]
fn durable_records_survive_power_loss_and_unsynced_ones_may_not() {
    for direct in [false, true] {
        durable_records_survive_power_loss(direct);
    }
}

fn durable_records_survive_power_loss(direct: bool) {
    let (sim, log_dir) = sim_log_direct(3, direct);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let p = open_stream(Arc::clone(&storage), log_dir, 0, LogPos::ZERO, 0, Vec::new()).unwrap();
    for n in 1..=100 {
        let end = p.append_frames(&rec(n, &[n as u8; 300]), 1, n).unwrap();
        if n % 10 == 0 {
            p.wait_durable(end).unwrap();
            assert!(p.durable() >= end);
            assert!(p.durable_mark() >= n);
        }
    }
    assert_eq!(p.durable_mark(), 100);
    p.append_frames(&rec(101, b"unsynced"), 1, 101).unwrap();
    assert_eq!(p.durable_mark(), 100, "a pending record is not durable");
    drop(p);
    sim.crash(CrashPolicy::DropAll);
    let numbers = read_log(&sim, &stream_dir(log_dir, 0));
    assert!(
        numbers.len() as u64 >= 100,
        "every synced record survives: {}",
        numbers.len()
    );
    assert_eq!(numbers[..100], (1..=100).collect::<Vec<_>>()[..]);
}

#[test]
fn segments_roll_over_and_prune_keeps_the_newest() {
    let (sim, log_dir) = sim_log(4);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 3, LogPos::ZERO, 0, Vec::new()).unwrap();
    p.set_segment_size(4 << 20);
    let big = vec![1u8; 60_000];
    let mut end = LogPos::ZERO;
    for n in 1..=400 {
        end = p.append_frames(&rec(n, &big), 1, n).unwrap();
        if n % 50 == 0 {
            p.wait_durable(end).unwrap();
        }
    }
    p.wait_durable(end).unwrap();
    let dir = stream_dir(log_dir, 3);
    let before = segment::list_segments(&sim, &dir).unwrap().len();
    assert!(before >= 3, "{before} segments for {end} bytes");
    assert_eq!(read_log(&sim, &dir), (1..=400).collect::<Vec<_>>());
    let syncs = sim.stats().dir_syncs;
    let removed = p.prune_below(u64::MAX).unwrap();
    assert!(removed > 0);
    let after = segment::list_segments(&sim, &dir).unwrap();
    assert_eq!(after.len(), 1, "the newest segment is kept");
    assert!(
        sim.stats().dir_syncs - syncs >= (before - 1) as u64,
        "each deletion is durable before the next: the segments on disk stay contiguous"
    );
    assert_eq!(p.disk_bytes(), end.bytes_since(after[0].0));
    p.shutdown().unwrap();
}

/// Pruned segments are recycled: renamed out of the log with their
/// header zeroed, two kept (the rest deleted), and the next segments
/// are made from them, reading back like any segment although the old
/// records stay behind the new ones. The queue lives in memory: files a
/// crash left queued are removed when the stream opens again.
/// Without zero-filling, recycling works the same, and no spare is ever
/// zero-filled: the segments before the first prune grow.
#[test]
fn pruned_segments_are_recycled_and_a_reopen_removes_leftovers() {
    for direct in [false, true] {
        for zero_fill in [true, false] {
            pruned_segments_are_recycled(direct, zero_fill);
        }
    }
}

fn pruned_segments_are_recycled(direct: bool, zero_fill: bool) {
    let (sim, log_dir) = sim_log_direct(13, direct);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 5, LogPos::ZERO, 0, Vec::new()).unwrap();
    let size = 64 << 10;
    p.set_zero_fill(zero_fill);
    p.set_segment_size(size);
    let dir = stream_dir(log_dir, 5);
    let recycled = || -> Vec<PathBuf> {
        sim.list_dir(&dir)
            .unwrap()
            .into_iter()
            .filter(|f| crate::logstore::spare::is_recycled(f))
            .collect()
    };
    let big = vec![3u8; 20_000];
    let mut n = 0;
    let mut write = |count: u64| {
        for _ in 0..count {
            n += 1;
            let end = p.append_frames(&rec(n, &big), 1, n).unwrap();
            p.wait_durable(end).unwrap();
        }
    };
    write(40);
    assert!(segment::list_segments(&sim, &dir).unwrap().len() >= 5);
    let spare = dir.join(crate::logstore::spare::SPARE_NAME);
    if !zero_fill {
        assert_eq!(p.stats().segments_zero_filled, 0);
        assert!(!p.files.spare.was_started() && !sim.exists(&spare));
    }
    p.prune_below(u64::MAX).unwrap();
    let queued = recycled();
    assert_eq!(queued.len(), 2, "two kept, the rest deleted");
    for f in &queued {
        let bytes = sim.read_current(f).unwrap();
        assert_eq!(bytes[..segment::HEADER_SIZE as usize], [0; 32], "{f:?}");
        assert!(bytes.len() as u64 >= segment::HEADER_SIZE + size);
    }
    assert_eq!(p.stats().segments_recycled, 0);
    write(12);
    assert_eq!(p.stats().segments_recycled, 2, "{:?}", p.stats());
    assert!(recycled().is_empty());
    let numbers = read_log(&sim, &dir);
    assert_eq!(numbers.last(), Some(&52));
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    assert_eq!(
        !zero_fill,
        !p.files.spare.was_started() && !sim.exists(&spare)
    );
    // Queue two more and crash: the files stay, the queue is gone.
    write(12);
    p.prune_below(u64::MAX).unwrap();
    assert_eq!(recycled().len(), 2);
    drop(p);
    sim.crash(CrashPolicy::KeepAll);
    assert_eq!(recycled().len(), 2);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 5, LogPos::ZERO, 0, Vec::new()).unwrap();
    assert!(recycled().is_empty(), "the reopen removed them");
    drop(p);
}

/// With zero-filling off no thread would ever replace a spare a crash
/// left behind, so the first `want` (here from `set_segment_size`)
/// removes it.
#[test]
fn without_zero_fill_a_spare_a_crash_left_is_removed() {
    let (sim, log_dir) = sim_log_direct(17, false);
    let spare = stream_dir(log_dir, 4).join(crate::logstore::spare::SPARE_NAME);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 4, LogPos::ZERO, 0, Vec::new()).unwrap();
    p.set_segment_size(64 << 10);
    wait_for_spare(&p);
    drop(p);
    sim.crash(CrashPolicy::KeepAll);
    assert!(sim.exists(&spare), "the crash left the spare");
    let p = open_stream(Arc::new(sim.clone()), log_dir, 4, LogPos::ZERO, 0, Vec::new()).unwrap();
    p.set_zero_fill(false);
    p.set_segment_size(64 << 10);
    assert!(!sim.exists(&spare));
    assert!(!p.files.spare.was_started());
}

/// Segment preallocation: once the spare is ready, the next segment is
/// that zero-filled file renamed (its file is longer than its records),
/// its records read back like any segment's (zeros after them are a
/// clean end, also after a crash), and shutdown removes the spare.
#[test]
fn a_new_segment_is_the_zero_filled_spare_renamed() {
    for direct in [false, true] {
        a_new_segment_is_the_spare_renamed(direct);
    }
}

fn a_new_segment_is_the_spare_renamed(direct: bool) {
    let (sim, log_dir) = sim_log_direct(6, direct);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 2, LogPos::ZERO, 0, Vec::new()).unwrap();
    let size = 256 << 10;
    p.set_segment_size(size);
    let dir = stream_dir(log_dir, 2);
    let spare = dir.join(crate::logstore::spare::SPARE_NAME);
    // Six records fill a segment; the last segment holds three, within
    // its preallocation.
    let big = vec![7u8; 50_000];
    let mut end = LogPos::ZERO;
    for n in 1..=9 {
        if n % 6 == 1 {
            wait_for_spare(&p);
        }
        end = p.append_frames(&rec(n, &big), 1, n).unwrap();
        p.wait_durable(end).unwrap();
    }
    let segments = segment::list_segments(&sim, &dir).unwrap();
    assert!(segments.len() >= 2, "{segments:?}");
    let mut preallocated = 0;
    for (start, path) in &segments {
        let file_len = sim.read_current(path).unwrap().len() as u64;
        let next = segments
            .iter()
            .find(|(s, _)| s > start)
            .map_or(end, |(s, _)| *s);
        let records = segment::HEADER_SIZE + next.bytes_since(*start);
        assert!(file_len >= records, "{path:?}");
        if file_len >= segment::HEADER_SIZE + size && file_len > records {
            preallocated += 1;
        }
    }
    assert!(
        preallocated >= 1,
        "a segment taken from the spare is preallocated: {segments:?}"
    );
    assert_eq!(read_log(&sim, &dir), (1..=9).collect::<Vec<_>>());
    drop(p);
    sim.crash(CrashPolicy::DropAll);
    assert_eq!(
        read_log(&sim, &dir),
        (1..=9).collect::<Vec<_>>(),
        "synced records survive, the zeros after them scan as a clean end"
    );
    let p = open_stream(Arc::new(sim.clone()), log_dir, 2, end, 9, Vec::new()).unwrap();
    p.set_segment_size(size);
    wait_for_spare(&p);
    assert!(sim.exists(&spare));
    p.shutdown().unwrap();
    assert!(!sim.exists(&spare), "shutdown removes the spare");
}

/// A segment created while no spare was ready grows as it fills, and
/// gives way to the spare as soon as one is ready, however small it
/// still is: its syncs cost more (they commit the file's size).
#[test]
fn a_growing_segment_gives_way_to_a_spare_once_one_is_ready() {
    for direct in [false, true] {
        a_growing_segment_gives_way(direct);
    }
}

fn a_growing_segment_gives_way(direct: bool) {
    let (sim, log_dir) = sim_log_direct(11, direct);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 3, LogPos::ZERO, 0, Vec::new()).unwrap();
    // No `set_segment_size`: no spare is wanted before the first write.
    let dir = stream_dir(log_dir, 3);
    let first = p.append_frames(&rec(1, b"first"), 1, 1).unwrap();
    p.wait_durable(first).unwrap();
    wait_for_spare(&p);
    let second = p.append_frames(&rec(2, b"second"), 1, 2).unwrap();
    p.wait_durable(second).unwrap();
    let segments = segment::list_segments(&sim, &dir).unwrap();
    assert_eq!(segments.len(), 2, "{segments:?}");
    let len = |i: usize| sim.read_current(&segments[i].1).unwrap().len() as u64;
    // An `O_DIRECT` file grows by whole blocks, zeros after the records.
    let grown = segment::HEADER_SIZE + first.get();
    let grown = if direct {
        grown.next_multiple_of(crate::io::IO_ALIGN as u64)
    } else {
        grown
    };
    assert_eq!(len(0), grown, "the first segment grew");
    assert_eq!(segments[1].0, first);
    assert!(
        len(1) >= segment::HEADER_SIZE + SEGMENT_SIZE,
        "the second is the spare"
    );
    assert_eq!(read_log(&sim, &dir), vec![1, 2]);
    assert_eq!(p.stats().durable_bytes, second.get());
}

/// Regression test (`waypoint simulate` seed 2632): a crash can keep a
/// new segment's header but none of its records, and recovery then
/// hands the stream that empty segment as its end. The growing
/// segment used to give way to a spare at the first write even while
/// empty, and the spare took its name: the stream listed one file
/// twice, so a clean close failed to remove it the second time (and a
/// prune of the empty entry would have deleted the live segment).
#[test]
fn an_empty_recovered_segment_keeps_its_file_when_a_spare_is_ready() {
    for direct in [false, true] {
        an_empty_recovered_segment_keeps_its_file(direct);
    }
}

fn an_empty_recovered_segment_keeps_its_file(direct: bool) {
    let (sim, log_dir) = sim_log_direct(14, direct);
    let dir = stream_dir(log_dir, 6);
    sim.create_dir_all(&dir).unwrap();
    let empty = sim
        .open(&dir.join(segment_name(LogPos::ZERO)), OpenMode::CreateNew)
        .unwrap();
    empty
        .write_at(&segment::encode_header(SchemeKind::PerWorker, 6, LogPos::ZERO), 0)
        .unwrap();
    empty.sync_data().unwrap();
    sim.sync_dir(&dir).unwrap();
    let p = open_stream(Arc::new(sim.clone()), log_dir, 6, LogPos::ZERO, 0, vec![(LogPos::ZERO, 0, 0)]).unwrap();
    p.set_segment_size(64 << 10);
    wait_for_spare(&p);
    let first = p.append_frames(&rec(1, b"first"), 1, 1).unwrap();
    p.wait_durable(first).unwrap();
    let second = p.append_frames(&rec(2, b"second"), 1, 2).unwrap();
    p.wait_durable(second).unwrap();
    assert_eq!(read_log(&sim, &dir), vec![1, 2]);
    let starts: Vec<LogPos> = p.files.segments.lock().iter().map(|s| s.start).collect();
    assert_eq!(
        starts,
        vec![LogPos::ZERO, first],
        "the empty segment grew, then gave way"
    );
    p.shutdown().unwrap();
    p.remove_all_segments().unwrap();
    assert!(segment::list_segments(&sim, &dir).unwrap().is_empty());
}

/// With `O_DIRECT` log files every write is whole blocks, so each one
/// rewrites the block holding the log's end, durable records included.
/// However a power loss tears such a rewrite (sector by sector, any
/// subset kept), the records synced before it read back unchanged and
/// the scan ends cleanly or at a torn tail, never as corruption.
#[test]
fn rewriting_the_last_block_never_loses_a_durable_record() {
    for seed in 0..40 {
        let (sim, log_dir) = sim_log_direct(100 + seed, true);
        sim.set_sector_size(Some(512));
        let p = open_stream(Arc::new(sim.clone()), log_dir, 1, LogPos::ZERO, 0, Vec::new()).unwrap();
        p.set_segment_size(16 << 10);
        let mut synced = 0;
        for n in 1..=60u64 {
            // Records of 64..~1 KiB: many end inside a block.
            let len = (n as usize * 37) % 1000;
            let end = p.append_frames(&rec(n, &vec![n as u8; len]), 1, n).unwrap();
            if n % 3 == 0 {
                p.wait_durable(end).unwrap();
                synced = n;
            }
        }
        drop(p);
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        let numbers = read_log(&sim, &stream_dir(log_dir, 1));
        assert!(numbers.len() as u64 >= synced, "seed {seed}: {numbers:?}");
        assert_eq!(
            numbers,
            (1..=numbers.len() as u64).collect::<Vec<_>>(),
            "seed {seed}: a prefix of the log"
        );
    }
}

/// An `O_DIRECT` segment left by an earlier run has an unknown partial
/// last block, so the reopened stream starts a new segment rather
/// than append to it (a non-empty one), and both read back in order.
#[test]
fn a_direct_log_starts_a_new_segment_after_a_reopen() {
    let (sim, log_dir) = sim_log_direct(16, true);
    let dir = stream_dir(log_dir, 4);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 4, LogPos::ZERO, 0, Vec::new()).unwrap();
    p.set_preallocate(false);
    let end = p.append_frames(&rec(1, b"first"), 1, 1).unwrap();
    p.wait_durable(end).unwrap();
    drop(p);
    sim.crash(CrashPolicy::DropAll);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 4, end, 1, vec![(LogPos::ZERO, end.get(), 1)]).unwrap();
    p.set_preallocate(false);
    let second = p.append_frames(&rec(2, b"second"), 1, 2).unwrap();
    p.wait_durable(second).unwrap();
    let starts: Vec<LogPos> = segment::list_segments(&sim, &dir)
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(starts, vec![LogPos::ZERO, end]);
    assert_eq!(read_log(&sim, &dir), vec![1, 2]);
    p.shutdown().unwrap();
}

/// With preallocation off no spare is made and no thread is started
/// for it: segments are created empty and grow.
#[test]
fn without_preallocation_no_spare_thread_runs() {
    let (sim, log_dir) = sim_log(12);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 4, LogPos::ZERO, 0, Vec::new()).unwrap();
    p.set_preallocate(false);
    p.set_segment_size(64 << 10);
    let big = vec![7u8; 50_000];
    for n in 1..=4 {
        let end = p.append_frames(&rec(n, &big), 1, n).unwrap();
        p.wait_durable(end).unwrap();
    }
    let dir = stream_dir(log_dir, 4);
    assert!(segment::list_segments(&sim, &dir).unwrap().len() >= 2);
    assert!(!p.files.spare.was_started());
    assert!(!sim.exists(&dir.join(crate::logstore::spare::SPARE_NAME)));
    p.shutdown().unwrap();
}

/// A thread that is unwinding already may still commit (a `Drop` that
/// commits during a panic): its write is not taken for a panic of the
/// write, and the stream stays healthy.
#[test]
fn a_commit_during_unwinding_does_not_poison_the_log() {
    let (_sim, log_dir) = sim_log(13);
    let p = open_stream(Arc::new(_sim.clone()), log_dir, 5, LogPos::ZERO, 0, Vec::new()).unwrap();
    struct SyncOnDrop<'a>(&'a Stream, LogPos);
    impl Drop for SyncOnDrop<'_> {
        fn drop(&mut self) {
            self.0.sync_to(self.1).unwrap();
        }
    }
    let first = p.append_frames(&rec(1, b"first"), 1, 1).unwrap();
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _commit = SyncOnDrop(&p, first);
        panic!("a panic while a commit is pending (expected by this test)");
    }));
    assert!(unwound.is_err());
    p.check_healthy().unwrap();
    assert!(p.durable() >= first);
    assert_eq!(p.stats().committer_syncs, 1);
    let second = p.append_frames(&rec(2, b"second"), 1, 2).unwrap();
    p.wait_durable(second).unwrap();
}

/// A preallocation that fails (here: ENOSPC on the spare) only stops
/// preallocating: segments are created empty and grow, the log goes
/// on until it needs space itself, and no spare is left behind.
#[test]
fn a_failed_preallocation_falls_back_to_growing_segments() {
    let (sim, log_dir) = sim_log(7);
    // Room for eight spares of 64 KiB (so one is attempted) and a few
    // thousand records.
    sim.set_space_limit(Some(540 << 10));
    sim.inject(
        crate::io::Fault::at(sim.op_count(), crate::io::FaultKind::Enospc)
            .on_path(crate::logstore::spare::SPARE_NAME),
    );
    let p = open_stream(Arc::new(sim.clone()), log_dir, 1, LogPos::ZERO, 0, Vec::new()).unwrap();
    p.set_segment_size(64 << 10);
    let dir = stream_dir(log_dir, 1);
    let spare = dir.join(crate::logstore::spare::SPARE_NAME);
    let t0 = std::time::Instant::now();
    while sim.exists(&spare) || !p.files.spare.has_stopped() {
        assert!(
            t0.elapsed().as_secs() < 10,
            "the preallocation never failed"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut n = 0;
    let e = loop {
        n += 1;
        let end = p.append_frames(&rec(n, &[5; 100]), 1, n).unwrap();
        if let Err(e) = p.wait_durable(end) {
            break e;
        }
        assert!(n < 20_000, "the disk never filled up");
    };
    assert!(e.is_log_full(), "{e:?}");
    assert!(n > 1000, "the log used the space the spare could not");
    assert_eq!(
        read_log(&sim, &dir)[..n as usize - 1],
        (1..n).collect::<Vec<_>>()[..]
    );
}

/// On a disk with room for fewer than eight spares none is
/// zero-filled: every byte of it stays for the log, which grows its
/// segments as they fill.
#[test]
fn a_small_disk_gets_no_zero_filled_spare() {
    let (sim, log_dir) = sim_log(8);
    sim.set_space_limit(Some(256 << 10));
    let p = open_stream(Arc::new(sim.clone()), log_dir, 1, LogPos::ZERO, 0, Vec::new()).unwrap();
    p.set_segment_size(64 << 10);
    let dir = stream_dir(log_dir, 1);
    let spare = dir.join(crate::logstore::spare::SPARE_NAME);
    let mut n = 0;
    while n < 1500 {
        n += 1;
        let end = p.append_frames(&rec(n, &[5; 100]), 1, n).unwrap();
        p.wait_durable(end).unwrap();
        assert!(!sim.exists(&spare), "a spare on a disk too small for eight");
    }
    assert!(p.files.spare.was_started() && !p.files.spare.has_stopped());
    assert_eq!(p.files.spare.taken(), (0, 0));
}

#[test]
fn failed_sync_poisons_and_never_reports_durability() {
    let (sim, log_dir) = sim_log(5);
    let p = open_stream(Arc::new(sim.clone()), log_dir, 0, LogPos::ZERO, 0, Vec::new()).unwrap();
    let end = p.append_frames(&rec(1, b"a"), 1, 1).unwrap();
    p.wait_durable(end).unwrap();
    sim.inject(crate::io::Fault::at(sim.op_count(), crate::io::FaultKind::Eio).on_path(".wal"));
    let end = p.append_frames(&rec(2, b"b"), 1, 2).unwrap();
    let r = p.wait_durable(end);
    assert!(matches!(r, Err(Error::Poisoned { .. })), "{r:?}");
    assert!(p.durable() < end);
    assert!(p.append_frames(&rec(3, b"c"), 1, 3).is_err());
}
