//! Scheme-neutral log storage: the files every log-based persistence
//! scheme writes its records into, and the frame around each record
//! (seed 000 §3.1's stages 2 and 3, with the segment files' allocation
//! §3.1 leaves open; §3.8's bypassing of the operating system's cache).
//!
//! - [`frame`]: the frame around a record (length, CRC32C salted with the
//!   stream position, the durable watermark) and the vint64 integers.
//! - [`scan`]: scanning a segment's frames; the tail rule that tells a torn
//!   tail from corruption.
//! - [`segment`]: segment file names, the segment header (format version,
//!   scheme tag), retiring a segment (delete or archive).
//! - [`spare`]: segment preallocation (recycled pruned segments, else a
//!   zero-filled spare file per stream, renamed into the next segment).
//! - [`blocks`]: a segment written in whole aligned blocks (`O_DIRECT`).
//! - [`stream`]: a durable stream of frames: the in-memory chunk ring,
//!   the writer thread with sync pacing, the segment files, the durable
//!   watermark and the waits on it, failure handling.
//!
//! It knows nothing of what the records mean: no GSNs, page records or
//! commit protocols. A scheme owns its payloads and reads them through
//! [`scan::Payloads`].

pub mod blocks;
pub mod frame;
pub mod scan;
pub mod segment;
pub mod spare;
pub mod stream;
#[cfg(test)]
mod test_support;
