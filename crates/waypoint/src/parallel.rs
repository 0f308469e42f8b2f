//! Fork-join over scoped threads: the one way recovery, checkpoint
//! loading and the like spread a batch of independent work items over
//! threads.
//!
//! [`on_threads`] gives each item a thread of its own (callers size their
//! batches to the threads they want); [`taking_turns`] runs many items on
//! at most the threads it is given, each thread taking the next item when
//! it is done with one. Every thread is joined before the call returns, and
//! a thread that panics becomes [`Error::Internal`] naming the work rather
//! than unwinding through the caller: a recovery that hits a bug reports it
//! as a typed error and leaves the files as they were.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Run `work(i, item)` for every item, each on a thread of its own, and
/// return the results in item order; the first error (in item order)
/// wins. `what` names the work in the error a panicking thread becomes
/// ("log analysis", "checkpoint load").
pub(crate) fn on_threads<I: Send, T: Send>(
    what: &str,
    items: impl IntoIterator<Item = I>,
    work: impl Fn(usize, I) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let work = &work;
                s.spawn(move || work(i, item))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Internal {
                        what: format!("a {what} thread panicked"),
                    })
                })
            })
            .collect()
    })
}

/// Run `work(i, item)` for every item on at most `threads` threads (never
/// more than the items), and return the results in item order. Each
/// thread takes the next item in order when it is done with one, so items
/// of uneven sizes still share the threads out. After
/// an error no further item is started; the first error in item order
/// wins, as in [`on_threads`] (every item before a failed one was started,
/// so it is finished and its own error, if any, seen first).
pub(crate) fn taking_turns<I: Send, T: Send>(
    what: &str,
    threads: usize,
    items: Vec<I>,
    work: impl Fn(usize, I) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let n = items.len();
    let items: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let results: Vec<Mutex<Option<Result<T>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    on_threads(what, 0..threads.clamp(1, n.max(1)), |_, _| {
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = items.get(i) else { break };
            let item = slot.lock().take().expect("each item is taken once");
            let result = work(i, item);
            if result.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            *results[i].lock() = Some(result);
        }
        Ok(())
    })?;
    let mut out = Vec::with_capacity(n);
    for slot in results {
        match slot.into_inner() {
            Some(result) => out.push(result?),
            // Items are started in order and each started one finishes, so
            // an item never started lies after a failed one, whose error
            // was returned above.
            None => unreachable!("an item was skipped without an earlier error"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_item_order() {
        let out = on_threads("test", [3u64, 1, 2], |i, x| Ok((i, x * 10))).unwrap();
        assert_eq!(out, vec![(0, 30), (1, 10), (2, 20)]);
    }

    #[test]
    fn the_first_error_in_item_order_wins() {
        let r: Result<Vec<()>> = on_threads("test", 0..4u64, |_, x| {
            if x >= 1 {
                Err(Error::Internal {
                    what: format!("item {x}"),
                })
            } else {
                Ok(())
            }
        });
        match r {
            Err(Error::Internal { what }) => assert_eq!(what, "item 1"),
            other => panic!("expected item 1's error, got {other:?}"),
        }
    }

    #[test]
    fn taking_turns_uses_at_most_its_threads_and_keeps_item_order() {
        let live = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let out = taking_turns("test", 3, (0..40u64).collect(), |i, x| {
            let now = live.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_micros(200));
            live.fetch_sub(1, Ordering::SeqCst);
            Ok((i as u64, x * 2))
        })
        .unwrap();
        assert_eq!(out, (0..40u64).map(|x| (x, x * 2)).collect::<Vec<_>>());
        let most = most.into_inner();
        assert!(
            (1..=3).contains(&most),
            "{most} items ran at once on 3 threads"
        );
    }

    #[test]
    fn taking_turns_returns_the_first_error_in_item_order_and_stops() {
        let started = AtomicUsize::new(0);
        let r: Result<Vec<()>> = taking_turns("test", 2, (0..1000u32).collect(), |_, x| {
            started.fetch_add(1, Ordering::SeqCst);
            if x == 3 || x == 4 {
                Err(Error::Internal {
                    what: format!("item {x}"),
                })
            } else {
                Ok(())
            }
        });
        match r {
            Err(Error::Internal { what }) => assert_eq!(what, "item 3"),
            other => panic!("expected item 3's error, got {other:?}"),
        }
        assert!(
            started.into_inner() < 1000,
            "items went on being started after an error"
        );
        let empty: Vec<u8> = taking_turns("test", 4, Vec::<u8>::new(), |_, x| Ok(x)).unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn a_panicking_thread_is_an_internal_error_naming_the_work() {
        let r: Result<Vec<()>> = on_threads("sample", [0u8, 1], |_, x| {
            assert_eq!(x, 0, "deliberate");
            Ok(())
        });
        match r {
            Err(Error::Internal { what }) => assert_eq!(what, "a sample thread panicked"),
            other => panic!("expected a panic turned into an error, got {other:?}"),
        }
    }
}
