//! Stages 2 and 3 of a stream: its segment files (seed 000 §3.1, Fig. 2).
//!
//! Stage 2 is a sequence of segment files named by the stream position of
//! their first byte ([`super::super::segment`]); a chunk is written to the
//! newest, a new segment is started (from the stream's spare when one is
//! ready, [`super::super::spare`]) when it is full or the stream jumped,
//! and `O_DIRECT` segments are written in whole blocks
//! ([`super::super::blocks`]). Stage 3 retires whole segments: recycled
//! into a later one, deleted, or moved to an archive directory.
//!
//! Invariants: a write's bytes are durable only after `fdatasync` of every
//! segment it touched returned Ok and, for a new segment, after its
//! directory entry was synced; segments on disk stay contiguous (each
//! retirement is synced before the next), and a segment whose successor's
//! name is not durable is never retired, so the files always reach the
//! position recorded as synced.

use super::super::blocks::BlockWriter;
use super::super::segment::{self, segment_name};
use super::super::spare::Spare;
use super::ring::Chunk;
use crate::error::Result;
use crate::ids::LogPos;
use crate::io::{OpenMode, Storage, StorageFile};
use crate::persist::SchemeKind;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// By default a segment is closed and a new one started once it exceeds
/// this size (`PerWorkerOptions::wal_segment_bytes`).
pub const SEGMENT_SIZE: u64 = 16 << 20;

pub(super) struct Segment {
    pub start: LogPos,
    pub file: Arc<dyn StorageFile>,
    /// Bytes of frames (the file is `segment::HEADER_SIZE` longer).
    pub len: u64,
    pub max_mark: u64,
    /// Made from a preallocated spare (else it grows as it fills).
    pub preallocated: bool,
    /// Its directory entry is durable: the directory was synced after the
    /// file got its name (false only after a failed write left a new
    /// segment behind).
    pub named: bool,
}

/// What one write of chunks did.
pub(super) struct Written {
    /// Stream position after the last byte written.
    pub end: LogPos,
    /// Largest mark of a chunk written.
    pub max_mark: u64,
    /// Files synced.
    pub syncs: u64,
}

/// The segment files of one stream.
pub(super) struct Files {
    pub dir: PathBuf,
    storage: Arc<dyn Storage>,
    /// Whose segments these are: the scheme tag and stream id in headers.
    scheme: SchemeKind,
    id: u32,
    pub segments: Mutex<Vec<Segment>>,
    /// Some segment's name is durable (`Segment::named`): from then on the
    /// files on disk reach the durable position (pruning keeps a named
    /// segment), and it may be recorded as synced
    /// ([`super::Stream::synced_position`]).
    pub named_segment: AtomicBool,
    segment_size: AtomicU64,
    /// Stage 3: where retired segments go (deleted if unset).
    archive: std::sync::OnceLock<PathBuf>,
    /// The files the next segment is renamed from: recycled segments, and
    /// a zero-filled spare.
    pub spare: Arc<Spare>,
    /// Use the spare (`PerWorkerOptions::wal_preallocate`).
    preallocate: AtomicBool,
    /// The current segment's partial last block, for `O_DIRECT` segment
    /// files; made at the first write to one.
    blocks: Mutex<Option<BlockWriter>>,
}

impl Files {
    /// The files of stream `id` in `dir`, with the `existing` segments
    /// recovery kept (start, length, max mark), which it synced along with
    /// their directory. Recycled files a crash left behind are removed.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        scheme: SchemeKind,
        id: u32,
        existing: Vec<(LogPos, u64, u64)>,
    ) -> Result<Self> {
        let mut segments = Vec::new();
        let named_segment = !existing.is_empty();
        for (start, len, max_mark) in existing {
            let file = storage.open_log_file(&dir.join(segment_name(start)), OpenMode::Existing)?;
            segments.push(Segment {
                start,
                file,
                len,
                max_mark,
                // Recovery cut any zeros off: the file grows from here.
                preallocated: false,
                named: true,
            });
        }
        super::super::spare::remove_recycled_leftovers(storage.as_ref(), &dir)?;
        let spare = Spare::new(Arc::clone(&storage), &dir, id);
        Ok(Files {
            dir,
            storage,
            scheme,
            id,
            segments: Mutex::new(segments),
            named_segment: AtomicBool::new(named_segment),
            segment_size: AtomicU64::new(SEGMENT_SIZE),
            archive: std::sync::OnceLock::new(),
            spare,
            preallocate: AtomicBool::new(true),
            blocks: Mutex::new(None),
        })
    }

    pub fn set_archive(&self, dir: PathBuf) {
        let _ = self.archive.set(dir);
    }

    pub fn set_segment_size(&self, bytes: u64) {
        self.segment_size.store(bytes.max(1), Ordering::Relaxed);
        if self.preallocate.load(Ordering::Relaxed) {
            self.spare.want(self.spare_bytes());
        }
    }

    pub fn set_preallocate(&self, on: bool) {
        self.preallocate.store(on, Ordering::Relaxed);
    }

    /// Bytes a preallocated segment file gets: header and segment size.
    fn spare_bytes(&self) -> u64 {
        segment::HEADER_SIZE + self.segment_size.load(Ordering::Relaxed)
    }

    /// Write `chunks` (contiguous, the first starting at `from`, where the
    /// stream is durable) to the newest segment, rolling over to new
    /// segments, and sync them.
    pub fn write(&self, chunks: &VecDeque<Chunk>, from: LogPos) -> Result<Written> {
        let mut segments = self.segments.lock();
        let mut blocks = self.blocks.lock();
        let mut touched: Vec<Arc<dyn StorageFile>> = Vec::new();
        let mut new_segment = false;
        let mut end = from;
        let mut max_mark = 0;
        for chunk in chunks {
            if chunk.bytes.is_empty() {
                continue;
            }
            assert_eq!(chunk.start, end, "chunks are written in stream order");
            let preallocate = self.preallocate.load(Ordering::Relaxed);
            let roll = match segments.last() {
                None => true,
                Some(seg) => {
                    seg.len >= self.segment_size.load(Ordering::Relaxed)
                        || seg.start.advance(seg.len) != chunk.start
                        // A growing segment (the first after an open, or
                        // one made while no spare was ready) gives way to
                        // a spare as soon as one is: its syncs are slower.
                        // Not while it is empty: the spare would take its
                        // name (a crash can leave a segment whose header
                        // survived but no record, and recovery hands it
                        // over as this stream's end; `waypoint simulate`
                        // seed 2632 found one file listed twice).
                        || (preallocate
                            && !seg.preallocated
                            && seg.len > 0
                            && self.spare.is_ready())
                        // An `O_DIRECT` segment this process did not
                        // start: its partial last block is not known.
                        || (seg.file.is_direct()
                            && seg.len > 0
                            && !blocks.as_ref().is_some_and(|b| b.holds(seg.start)))
                }
            };
            if roll {
                if let Some(old) = segments.last() {
                    // Rolled before filling its preallocation (the stream
                    // jumped): cut the rest so the file holds just frames.
                    // A full segment keeps whatever follows its frames (a
                    // recycled file's old records): cutting would cost a
                    // size change per segment, and recovery knows a
                    // segment ends where the next one starts.
                    if old.start.advance(old.len) != chunk.start
                        && old.file.len()? > segment::HEADER_SIZE + old.len
                    {
                        old.file.set_len(segment::HEADER_SIZE + old.len)?;
                    }
                }
                // Before the spare is renamed over anything: a segment's
                // name is its start, so a start already listed would be
                // that segment's file.
                assert!(
                    segments.last().is_none_or(|s| s.start < chunk.start),
                    "one file per segment: segment starts increase"
                );
                let path = self.dir.join(segment_name(chunk.start));
                let from_spare = preallocate && self.spare.take(&path, self.spare_bytes())?;
                let file = if from_spare {
                    self.storage.open_log_file(&path, OpenMode::Existing)?
                } else {
                    self.storage.open_log_file(&path, OpenMode::CreateNew)?
                };
                // Synced with the segment's first frames below (an
                // `O_DIRECT` file gets it with their first block).
                let header = segment::encode_header(self.scheme, self.id, chunk.start);
                if file.is_direct() {
                    blocks
                        .get_or_insert_with(BlockWriter::new)
                        .begin_segment(chunk.start, &header);
                } else {
                    file.write_at(&header, 0)?;
                }
                segments.push(Segment {
                    start: chunk.start,
                    file,
                    len: 0,
                    max_mark: 0,
                    preallocated: from_spare,
                    named: false,
                });
                new_segment = true;
            }
            let seg = segments.last_mut().expect("a segment exists");
            debug_assert_eq!(seg.start.advance(seg.len), chunk.start, "chunks are contiguous");
            let at = segment::HEADER_SIZE + seg.len;
            if seg.file.is_direct() {
                let blocks = blocks.get_or_insert_with(BlockWriter::new);
                if !blocks.holds(seg.start) {
                    // A recovered segment without frames (a non-empty one
                    // rolled above): its tail is its header.
                    assert_eq!(seg.len, 0, "appends only to a segment whose tail is known");
                    let header = segment::encode_header(self.scheme, self.id, seg.start);
                    blocks.begin_segment(seg.start, &header);
                }
                blocks.write(seg.file.as_ref(), at, &chunk.bytes)?;
            } else {
                seg.file.write_at(&chunk.bytes, at)?;
            }
            seg.len += chunk.bytes.len() as u64;
            seg.max_mark = seg.max_mark.max(chunk.max_mark);
            if !touched.iter().any(|f| Arc::ptr_eq(f, &seg.file)) {
                touched.push(Arc::clone(&seg.file));
            }
            end = chunk.start.advance(chunk.bytes.len() as u64);
            max_mark = max_mark.max(chunk.max_mark);
        }
        for f in &touched {
            f.sync_data()?;
        }
        if new_segment {
            // A new segment's directory entry must be durable too, or the
            // file could vanish with its synced contents.
            self.storage.sync_dir(&self.dir)?;
            for seg in segments.iter_mut() {
                seg.named = true;
            }
            self.named_segment.store(true, Ordering::Release);
        }
        Ok(Written {
            end,
            max_mark,
            syncs: touched.len() as u64,
        })
    }

    /// Retire whole segments whose frames all have marks below `mark`,
    /// never the newest segment (it is still being written), and never one
    /// whose successor's name is not durable (a write that failed after
    /// starting a segment): the files on disk must still reach the durable
    /// position recorded as synced, or recovery would take the stream for
    /// a truncated log. Returns bytes removed.
    pub fn prune_below(&self, mark: u64) -> Result<u64> {
        let mut segments = self.segments.lock();
        let mut removed = 0;
        while segments.len() > 1 && segments[0].max_mark < mark && segments[1].named {
            removed += self.retire_oldest(&mut segments)?;
        }
        Ok(removed)
    }

    /// Retire every segment, the newest too.
    pub fn remove_all(&self) -> Result<()> {
        let mut segments = self.segments.lock();
        self.named_segment.store(false, Ordering::Release);
        while !segments.is_empty() {
            self.retire_oldest(&mut segments)?;
        }
        Ok(())
    }

    /// Delete (or archive) the oldest segment and make that durable before
    /// anything else happens to the directory. A crash may keep any subset
    /// of unsynced directory operations, so two unsynced deletions could
    /// leave an older segment behind a deleted newer one: a gap that
    /// recovery must (and does) call a lost segment. One at a time, the
    /// segments on disk stay contiguous. The segment leaves `segments` only
    /// after this succeeded, so a failed delete is still counted on disk.
    /// Without an archive, the segment is recycled instead when the spare
    /// can use it (spare.rs), which syncs the directory just the same.
    /// Returns the bytes of frames it held.
    fn retire_oldest(&self, segments: &mut Vec<Segment>) -> Result<u64> {
        let oldest = &segments[0];
        let path = self.dir.join(segment_name(oldest.start));
        let recycled = self.archive.get().is_none()
            && self.preallocate.load(Ordering::Relaxed)
            && self.spare.recycle(&path, oldest.file.as_ref())?;
        if !recycled {
            segment::retire(
                self.storage.as_ref(),
                &path,
                self.archive.get().map(|p| p.as_path()),
            )?;
            self.storage.sync_dir(&self.dir)?;
        }
        Ok(segments.remove(0).len)
    }

    /// Bytes of frames on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.segments.lock().iter().map(|s| s.len).sum()
    }
}
