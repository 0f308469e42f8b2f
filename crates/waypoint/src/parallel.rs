//! Fork-join over scoped threads: the one way recovery, checkpoint
//! loading and the like spread a batch of independent work items over
//! threads.
//!
//! Each item gets a thread of its own (callers size their batches to the
//! threads they want), every thread is joined before the call returns, and
//! a thread that panics becomes [`Error::Internal`] naming the work rather
//! than unwinding through the caller: a recovery that hits a bug reports it
//! as a typed error and leaves the files as they were.

use crate::error::{Error, Result};

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
