//! Scheme-neutral log storage: the files every log-based persistence
//! scheme writes its records into (seed 000 §3.1's stages 2 and 3, with
//! the segment files' allocation §3.1 leaves open).
//!
//! - [`segment`]: segment file names, the segment header (format version,
//!   scheme tag), retiring a segment (delete or archive).
//! - [`spare`]: segment preallocation (recycled pruned segments, else a
//!   zero-filled spare file per stream, renamed into the next segment).
//! - [`blocks`]: a segment written in whole aligned blocks (`O_DIRECT`).
//!
//! It knows nothing of what the records mean: no GSNs, page records or
//! commit protocols.

pub mod blocks;
pub mod segment;
pub mod spare;
