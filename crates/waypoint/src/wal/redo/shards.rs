//! The records redo works on, split into page shards so that every phase
//! of redo runs on all the threads it is given (seed 000 §3.7 asks for
//! recovery that scales with cores): each thread scatters its slice of
//! every partition's records to the shards, then each shard sorts its
//! records by page and GSN (a page's records become one run, in chain
//! order) and reads the GSN each of its pages has on disk.
//!
//! There are several shards per thread ([`SHARDS_PER_THREAD`]), taken
//! largest first by whichever thread is free (`parallel::taking_turns`):
//! with one shard per thread, a shard that drew more of a workload's hot
//! pages kept one thread busy alone for a fifth of redo
//! (docs/decisions/measurements.md, 2026-12-06, redo's shards).
//!
//! Invariant: a page's records all lie in one shard, sorted by GSN, and
//! each record's [`OnDisk`] relation to that page is decided here once.

use super::{log_corruption, OnDisk};
use crate::buffer::page;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::ids::Gsn;
use crate::parallel::{on_threads, taking_turns};
use crate::wal::recovery::PartitionLog;
use std::ops::Range;

/// One record, by its page and GSN, and where it lies in the logs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub page: u64,
    pub gsn: Gsn,
    pub part: u32,
    pub rec: u32,
}

/// A page's records within its shard, and the page's GSN on disk.
pub(super) struct PageRun {
    pub page: u64,
    pub disk: Gsn,
    pub entries: Range<usize>,
}

/// The records of the pages of one shard.
pub(super) struct Shard {
    /// Sorted by (page, GSN).
    pub entries: Vec<Entry>,
    /// Per entry.
    pub state: Vec<OnDisk>,
    pub pages: Vec<PageRun>,
}

/// Shards per recovery thread when there are two or more: enough that
/// the largest shard is a small part of a thread's share, few enough that
/// each stays a long run of work.
pub(super) const SHARDS_PER_THREAD: usize = 8;

/// No more shards than this unless there are more threads: every
/// scattering thread keeps a bucket per shard.
const MAX_SHARDS: usize = 1024;

/// Pages go to shards in blocks of 64 consecutive pages, so a shard's
/// reads of a tree's neighbouring pages stay near each other.
fn shard_of(page: u64, shards: usize) -> usize {
    ((page >> 6) % shards as u64) as usize
}

/// Split the records of `logs` into page shards, [`SHARDS_PER_THREAD`]
/// per thread (one for a single thread, at most [`MAX_SHARDS`] unless the
/// threads are more), and read each page's GSN on disk
/// (which loads the page into `pool`). The shards come largest first, the
/// order the later phases take them in.
pub(super) fn build(logs: &[PartitionLog], pool: &BufferPool, threads: usize) -> Result<Vec<Shard>> {
    assert!(threads > 0, "redo runs on at least one thread");
    let shards = if threads == 1 {
        1
    } else {
        (threads * SHARDS_PER_THREAD).min(MAX_SHARDS.max(threads))
    };
    if u32::try_from(logs.len()).is_err()
        || logs
            .iter()
            .any(|l| u32::try_from(l.records.len()).is_err())
    {
        return Err(Error::Internal {
            what: "more than 2^32 log partitions or records in one partition".into(),
        });
    }
    let t0 = std::time::Instant::now();
    let slices: Vec<usize> = (0..threads).collect();
    let scattered = on_threads("redo scatter", &slices, |_, &t| {
        let mut out: Vec<Vec<Entry>> = (0..shards).map(|_| Vec::new()).collect();
        let mut max_page = 0;
        for (part, l) in logs.iter().enumerate() {
            let n = l.records.len();
            for rec in n * t / threads..n * (t + 1) / threads {
                let r = &l.records[rec];
                max_page = max_page.max(r.page);
                out[shard_of(r.page, shards)].push(Entry {
                    page: r.page,
                    gsn: r.gsn,
                    part: part as u32,
                    rec: rec as u32,
                });
            }
        }
        Ok((out, max_page))
    })?;
    let max_page = scattered.iter().map(|(_, m)| *m).max().unwrap_or(0);
    if logs.iter().any(|l| !l.records.is_empty()) {
        pool.ensure_allocated(max_page + 1);
    }
    // Transposed: shard s gets every thread's bucket s.
    let mut parts: Vec<Vec<Vec<Entry>>> = (0..shards).map(|_| Vec::new()).collect();
    for (buckets, _) in scattered {
        for (s, bucket) in buckets.into_iter().enumerate() {
            parts[s].push(bucket);
        }
    }
    tracing::debug!(
        scatter_ms = t0.elapsed().as_millis() as u64,
        "redo: records scattered to page shards"
    );
    let size = |buckets: &Vec<Vec<Entry>>| buckets.iter().map(Vec::len).sum::<usize>();
    parts.sort_by_key(|buckets| std::cmp::Reverse(size(buckets)));
    taking_turns("redo shard", threads, parts, |_, buckets| {
        shard(logs, pool, buckets, shards)
    })
}

/// The records of `buckets` sorted by (page, GSN): counted out by page
/// (one pass to count, one to place: a comparison sort of every record
/// made one thread's redo slower than the hash map it replaced), then
/// each page's few records sorted by GSN.
fn by_page(buckets: Vec<Vec<Entry>>, shards: usize) -> Vec<Entry> {
    let n: usize = buckets.iter().map(Vec::len).sum();
    let all = || buckets.iter().flatten();
    // The shard's pages numbered densely: its blocks of 64 are every
    // `shards`-th block of the file.
    let dense = |page: u64| ((page >> 6) / shards as u64) << 6 | (page & 63);
    let Some(low) = all().map(|e| dense(e.page)).min() else {
        return Vec::new();
    };
    let high = all().map(|e| dense(e.page)).max().expect("not empty");
    let mut start = vec![0usize; (high - low) as usize + 2];
    for e in all() {
        start[(dense(e.page) - low) as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut entries = vec![
        Entry {
            page: 0,
            gsn: Gsn::ZERO,
            part: 0,
            rec: 0
        };
        n
    ];
    let mut next = start.clone();
    for e in all() {
        let slot = &mut next[(dense(e.page) - low) as usize];
        entries[*slot] = *e;
        *slot += 1;
    }
    for w in start.windows(2) {
        if w[1] - w[0] > 1 {
            entries[w[0]..w[1]].sort_unstable_by_key(|e| (e.gsn, e.part, e.rec));
        }
    }
    debug_assert!(
        entries
            .windows(2)
            .all(|w| (w[0].page, w[0].gsn) <= (w[1].page, w[1].gsn)),
        "a shard's records are sorted by page and GSN"
    );
    entries
}

/// One shard: its records sorted into page runs, each page's GSN on disk,
/// and which records the disk copy already contains (the chain ending at
/// that GSN).
fn shard(
    logs: &[PartitionLog],
    pool: &BufferPool,
    buckets: Vec<Vec<Entry>>,
    shards: usize,
) -> Result<Shard> {
    let entries = by_page(buckets, shards);
    let mut state = vec![OnDisk::Above; entries.len()];
    let mut pages = Vec::new();
    let mut start = 0;
    while start < entries.len() {
        let pid = entries[start].page;
        let end = start + entries[start..].partition_point(|e| e.page == pid);
        let disk = page::page_gsn(pool.exclusive_for_redo(pid)?.data());
        let run = &entries[start..end];
        for (i, e) in run.iter().enumerate() {
            if e.gsn <= disk {
                state[start + i] = OnDisk::Abandoned;
            }
        }
        let mut at = disk;
        while let Ok(i) = run.binary_search_by_key(&at, |e| e.gsn) {
            let e = run[i];
            state[start + i] = OnDisk::Contained;
            let prev = logs[e.part as usize].records[e.rec as usize].prev;
            if prev >= at {
                return Err(log_corruption(
                    &logs[e.part as usize],
                    at,
                    "its previous page GSN is not below its own",
                ));
            }
            at = prev;
        }
        pages.push(PageRun {
            page: pid,
            disk,
            entries: start..end,
        });
        start = end;
    }
    Ok(Shard {
        entries,
        state,
        pages,
    })
}
