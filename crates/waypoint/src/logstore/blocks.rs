//! Writing a log segment in whole aligned blocks, for segment files opened
//! with `O_DIRECT` (`PerWorkerOptions::log_direct_io`; seed 000 §3.1 puts
//! the log's second stage on SSD; §3.8 bypasses the operating system's
//! cache with `O_DIRECT`, there for the database file).
//!
//! `O_DIRECT` takes only writes of whole 4 KiB blocks at aligned offsets
//! from aligned memory, while the log ends wherever its last record ends.
//! So the writer keeps the segment's partial last block in memory and
//! rewrites it, now followed by the next records, with the next write (as
//! PostgreSQL and LeanStore do). A block's bytes past the log's end are
//! zero: they read as a torn tail, which is where a segment scan stops
//! anyway.
//!
//! Invariant: a rewrite of the last block carries the bytes already written
//! there unchanged, so however a crash tears it, the durable records in it
//! read the same as before. Every write starts at the block holding the
//! segment's end and covers the new bytes completely.

use crate::error::Result;
use crate::ids::LogPos;
use crate::io::{AlignedBuf, StorageFile, IO_ALIGN};

/// Bytes staged per write: the writer's chunks (256 KiB) and a partial
/// block fit, and larger records go in pieces.
const STAGING: usize = 1 << 20;

/// The aligned writes of one stream's current segment.
pub struct BlockWriter {
    /// `staging[..tail_len]` holds the segment's bytes from file offset
    /// `tail_at` (a block boundary) to its end.
    staging: AlignedBuf,
    tail_at: u64,
    tail_len: usize,
    /// Start position of the segment whose tail this is, if any: a segment
    /// this writer did not start has an unknown tail and is not appended to.
    segment: Option<LogPos>,
}

impl BlockWriter {
    pub fn new() -> Self {
        BlockWriter {
            staging: AlignedBuf::zeroed(STAGING),
            tail_at: 0,
            tail_len: 0,
            segment: None,
        }
    }

    /// Whether this writer holds the tail of the segment starting at `start`.
    pub fn holds(&self, start: LogPos) -> bool {
        self.segment == Some(start)
    }

    /// Begin the segment starting at stream position `start`, whose file
    /// begins with `header`; the header reaches the file with the first
    /// write.
    pub fn begin_segment(&mut self, start: LogPos, header: &[u8]) {
        assert!(header.len() < IO_ALIGN, "a header fits one block");
        self.staging.as_mut_slice()[..header.len()].copy_from_slice(header);
        self.tail_at = 0;
        self.tail_len = header.len();
        self.segment = Some(start);
    }

    /// Write `bytes` to `file` at file offset `at`, which must be where the
    /// segment begun last ends; afterwards it ends after them.
    pub fn write(&mut self, file: &dyn StorageFile, at: u64, mut bytes: &[u8]) -> Result<()> {
        assert!(self.segment.is_some(), "a segment was begun");
        assert_eq!(
            at,
            self.tail_at + self.tail_len as u64,
            "writes continue the segment's end"
        );
        while !bytes.is_empty() {
            let n = bytes.len().min(STAGING - self.tail_len);
            let filled = self.tail_len + n;
            let padded = filled.next_multiple_of(IO_ALIGN);
            let staging = self.staging.as_mut_slice();
            staging[self.tail_len..filled].copy_from_slice(&bytes[..n]);
            staging[filled..padded].fill(0);
            file.write_at(&staging[..padded], self.tail_at)?;
            // The partial last block (if any) becomes the next write's first.
            let whole = filled - filled % IO_ALIGN;
            staging.copy_within(whole..filled, 0);
            self.tail_at += whole as u64;
            self.tail_len = filled - whole;
            bytes = &bytes[n..];
        }
        Ok(())
    }
}

impl Default for BlockWriter {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{OpenMode, SimStorage, Storage};
    use std::path::Path;

    /// Writes of every size, in pieces larger than the staging buffer too,
    /// leave the file holding exactly the bytes written, zeros after them up
    /// to a block boundary, and make only aligned writes.
    #[test]
    fn a_segment_written_in_blocks_holds_its_bytes_then_zeros() {
        let sim = SimStorage::new(1);
        sim.set_direct_log(true);
        sim.create_dir_all(Path::new("/db")).unwrap();
        let file = sim
            .open_log_file(Path::new("/db/s"), OpenMode::CreateNew)
            .unwrap();
        assert!(file.is_direct());
        let mut w = BlockWriter::new();
        w.begin_segment(LogPos::new(7), b"header!");
        assert!(w.holds(LogPos::new(7)) && !w.holds(LogPos::new(8)));
        let mut expect = b"header!".to_vec();
        for (i, len) in [1, 4088, 4096, 5000, 0, 3, STAGING + 10_000, 17]
            .into_iter()
            .enumerate()
        {
            let bytes: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8 | 1).collect();
            w.write(file.as_ref(), expect.len() as u64, &bytes).unwrap();
            expect.extend_from_slice(&bytes);
            let image = sim.read_current(Path::new("/db/s")).unwrap();
            assert_eq!(image.len(), expect.len().next_multiple_of(IO_ALIGN));
            assert_eq!(&image[..expect.len()], &expect[..]);
            assert!(image[expect.len()..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    #[should_panic(expected = "writes continue the segment's end")]
    fn a_write_elsewhere_than_the_end_is_refused() {
        let sim = SimStorage::new(1);
        sim.create_dir_all(Path::new("/db")).unwrap();
        let file = sim.open(Path::new("/db/s"), OpenMode::CreateNew).unwrap();
        let mut w = BlockWriter::new();
        w.begin_segment(LogPos::ZERO, b"h");
        let _ = w.write(file.as_ref(), 5, b"x");
    }
}
