//! Reserved appends on a simulated disk: the writer stops at the first
//! reservation not yet released, fills from many threads land in stream
//! order, and an abandoned reservation stops the stream.

use super::super::tests::{durable_within, empty_stream, read_log, rec, stream_dir};
use super::*;
use crate::io::CrashPolicy;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Record `n` with `len` filler bytes, placed into `r` at `at`.
fn fill_with(r: &Reserved, at: usize, n: u64, len: usize) {
    let mut bytes = rec(n, &vec![n as u8; len]);
    // SAFETY: the test's ranges are disjoint and filled before release.
    unsafe { r.fill(at, &mut bytes) };
}

/// A reservation filled and released after a later one holds the later
/// one back: nothing from the first unreleased byte on is written, even
/// when a waiter asks for it; once the hole is filled both become durable,
/// in stream order.
#[test]
fn the_writer_never_writes_past_an_unfilled_reservation() {
    let (sim, p) = empty_stream(21);
    p.set_sync_interval(Duration::ZERO);
    let len = rec(1, &[1; 100]).len();
    let a = p.reserve(len, 1, 1).unwrap();
    let b = p.reserve(len, 1, 2).unwrap();
    assert_eq!(a.end(), b.start());
    assert_eq!(p.appended(), b.end(), "appended covers reservations");
    fill_with(&b, 0, 2, 100);
    p.release(&b);
    p.request_flush(b.end());
    assert!(
        !durable_within(&p, a.start().advance(1), Duration::from_millis(200)),
        "written past the unfilled reservation"
    );
    fill_with(&a, 0, 1, 100);
    p.release(&a);
    p.wait_durable(b.end()).unwrap();
    p.shutdown().unwrap();
    drop(p);
    sim.crash(CrashPolicy::DropAll);
    assert_eq!(read_log(&sim, &stream_dir(Path::new("/db/log"), 0)), vec![1, 2]);
}

/// Many threads reserve (in mark order, under a lock as a central log's
/// latch does) and fill their parts of each reservation concurrently,
/// out of order; every record reaches the segments once, in order, and a
/// power loss keeps everything made durable.
#[test]
fn concurrent_fills_reach_the_log_in_stream_order() {
    let (sim, p) = empty_stream(22);
    p.set_sync_interval(Duration::ZERO);
    let latch = parking_lot::Mutex::new(0u64);
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 300;
    let durable_end = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..THREADS {
            let (p, latch) = (Arc::clone(&p), &latch);
            handles.push(s.spawn(move || {
                let mut last = LogPos::ZERO;
                for i in 0..PER_THREAD {
                    let size = 50 + ((t * 7 + i * 13) % 400) as usize;
                    // Two records per reservation, the second filled first.
                    let (r, n, len) = {
                        let mut next = latch.lock();
                        let n = *next + 1;
                        *next += 2;
                        let len = rec(n, &vec![0; size]).len();
                        let both = len + rec(n + 1, &vec![0; size]).len();
                        (p.reserve(both, 2, n + 1).unwrap(), n, len)
                    };
                    fill_with(&r, len, n + 1, size);
                    if i % 5 == 0 {
                        std::thread::yield_now();
                    }
                    fill_with(&r, 0, n, size);
                    p.release(&r);
                    last = r.end();
                    if i % 50 == 0 {
                        p.wait_durable(last).unwrap();
                    }
                }
                p.wait_durable(last).unwrap();
                last
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    });
    assert_eq!(p.durable(), p.appended());
    assert!(p.durable() >= durable_end);
    p.shutdown().unwrap();
    drop(p);
    sim.crash(CrashPolicy::DropAll);
    let numbers = read_log(&sim, &stream_dir(Path::new("/db/log"), 0));
    assert_eq!(numbers, (1..=THREADS * PER_THREAD * 2).collect::<Vec<_>>());
}

/// A reservation whose filler gives up stops the stream: waiters get an
/// error rather than waiting for the hole forever, and nothing after it is
/// reported durable.
#[test]
fn an_abandoned_reservation_poisons_the_stream() {
    let (_sim, p) = empty_stream(23);
    let len = rec(1, &[1; 40]).len();
    let a = p.reserve(len, 1, 1).unwrap();
    let b = p.reserve(len, 1, 2).unwrap();
    fill_with(&b, 0, 2, 40);
    p.release(&b);
    let waiter = {
        let p = Arc::clone(&p);
        let end = b.end();
        std::thread::spawn(move || p.wait_durable(end))
    };
    std::thread::sleep(Duration::from_millis(50));
    p.abandon(&a);
    let e = waiter.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("never filled"), "{e}");
    assert!(p.durable() <= a.start());
    assert!(p.reserve(len, 1, 3).is_err(), "a poisoned stream takes nothing");
}

/// A committer that syncs itself (`sync_to`) waits for the fill too, then
/// writes the released bytes.
#[test]
fn a_committer_syncing_itself_waits_for_the_fill() {
    let (_sim, p) = empty_stream(24);
    let len = rec(1, &[1; 64]).len();
    let a = p.reserve(len, 1, 1).unwrap();
    let b = p.reserve(len, 1, 2).unwrap();
    fill_with(&b, 0, 2, 64);
    p.release(&b);
    let syncer = {
        let p = Arc::clone(&p);
        let end = b.end();
        std::thread::spawn(move || p.sync_to(end))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(p.durable() <= a.start(), "synced past the unfilled reservation");
    fill_with(&a, 0, 1, 64);
    p.release(&a);
    syncer.join().unwrap().unwrap();
    assert!(p.durable() >= b.end());
}
