//! The numbers the engine orders its work by, each a type of its own so
//! that one is never passed where another is meant:
//!
//! - [`Gsn`]: a global sequence number (seed 000 §2.4; §3.2 states RFA's
//!   GSN_flushed in them), stamped on every log record and on the page the
//!   record changed. GSNs order the records of one page across log
//!   partitions; the WAL rule, checkpoints and the log floor are stated in
//!   them too.
//! - [`Tid`]: a transaction id in Silo's sense (seed 002 §2, with §2.1's
//!   epochs in its high bits): the version word of a record and the commit
//!   order of the transaction that wrote it.
//! - [`LogPos`]: a byte position in one log stream (one partition's log):
//!   where a record starts or ends, how far a stream is durable. Frames are
//!   salted with their position (`logstore::frame`).
//!
//! Invariant: each is stored as its raw `u64` (on disk, in the log, in an
//! atomic) and converted only there, with `new` and `get`, and in the
//! bit arithmetic of the TID layout; arithmetic is what each type's
//! methods allow. The scheme-neutral `logstore::stream` keeps plain `u64`
//! marks and notes, which the per-worker WAL's partition fills with GSNs
//! and TIDs.

use std::fmt;

/// A global sequence number (seed 000 §3.2): every log record gets one
/// above its transaction's previous record and the page's GSN, and the page
/// takes it. Records of a page form a chain in GSN order across partitions.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Gsn(u64);

impl Gsn {
    /// Below every record's GSN: a page never logged, an empty log.
    pub const ZERO: Gsn = Gsn(0);
    /// Above every GSN a record can carry: a bound that holds nothing back.
    pub const MAX: Gsn = Gsn(u64::MAX);

    #[inline]
    pub const fn new(raw: u64) -> Gsn {
        Gsn(raw)
    }

    /// The stored form.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The GSN right after this one.
    #[inline]
    pub fn next(self) -> Gsn {
        self.plus(1)
    }

    /// The GSN `n` after this one: the `n`th of a group reserved from it.
    /// GSNs stay below 2^63 (`wal::partition::MAX_GSN`), so this does not
    /// overflow.
    #[inline]
    pub fn plus(self, n: u64) -> Gsn {
        Gsn(self.0 + n)
    }

    /// The GSN right before this one (zero stays zero): everything below a
    /// GSN is at or below its predecessor.
    #[inline]
    pub fn prev_or_zero(self) -> Gsn {
        Gsn(self.0.saturating_sub(1))
    }
}

impl fmt::Display for Gsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Bit 63: set only in the placeholder of a record a commit is still
/// inserting, never in a committed TID.
const ABSENT_BIT: u64 = 1 << 63;
/// Bits 32..63 hold the epoch.
const EPOCH_SHIFT: u32 = 32;
/// Bits 0..16 hold the committing session's slot, bits 16..32 a sequence.
const SLOT_BITS: u32 = 16;

/// A record's TID word (seed 002 §2.1): the TID of the transaction that
/// wrote the record, or, while a commit inserts the record, a placeholder.
///
/// Layout: bit 63 is the placeholder flag (never set in a committed TID),
/// bits 32..63 the epoch, bits 16..32 a sequence and bits 0..16 the
/// committing session's slot. The slot makes TIDs unique across sessions:
/// without it two sessions could both commit the first TID of an epoch,
/// and a key deleted and re-inserted could carry the TID a concurrent
/// reader saw on the old record, passing its validation (found in review).
/// TIDs of different epochs are ordered compatibly with the serial order,
/// which value logging (seed 002 §3) relies on for replay.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tid(u64);

impl Tid {
    /// No transaction: a read-only commit's TID, and below every TID.
    pub const ZERO: Tid = Tid(0);
    /// Bits of the slot, the low bits of a TID.
    pub const SLOT_BITS: u32 = SLOT_BITS;
    /// The largest epoch: the clock saturates here rather than run into the
    /// placeholder bit (at 25 epochs a second, after 2.7 years of uptime).
    pub const MAX_EPOCH: u64 = (1 << (63 - EPOCH_SHIFT)) - 1;

    #[inline]
    pub const fn new(raw: u64) -> Tid {
        Tid(raw)
    }

    /// The stored form.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The TID of epoch `epoch`, with `sequence` within the epoch, committed
    /// by the session in slot `slot`.
    pub fn from_parts(epoch: u64, sequence: u16, slot: u16) -> Tid {
        debug_assert!(epoch <= Tid::MAX_EPOCH, "epoch {epoch} out of range");
        Tid((epoch << EPOCH_SHIFT) | ((sequence as u64) << SLOT_BITS) | slot as u64)
    }

    /// The smallest TID above `floor`, in epoch `epoch` or later, that ends
    /// in slot `slot`.
    pub fn first_above(floor: Tid, epoch: u64, slot: u16) -> Tid {
        let base = (epoch << EPOCH_SHIFT).max(floor.0 + 1);
        let unit = 1u64 << SLOT_BITS;
        let tid = Tid((base.div_ceil(unit) * unit) | slot as u64);
        debug_assert!(!tid.is_placeholder(), "TID space exhausted");
        tid
    }

    /// The placeholder a commit attempt inserts for a record it creates:
    /// readers skip it, and its committer knows its own by `owner`.
    #[inline]
    pub const fn placeholder(owner: u64) -> Tid {
        Tid(ABSENT_BIT | owner)
    }

    /// Is this a placeholder, not a committed TID?
    #[inline]
    pub const fn is_placeholder(self) -> bool {
        self.0 & ABSENT_BIT != 0
    }

    /// A committed transaction's TID: neither a placeholder nor zero.
    #[inline]
    pub const fn is_committed(self) -> bool {
        !self.is_placeholder() && self.0 != 0
    }

    /// The epoch the TID was committed in.
    #[inline]
    pub const fn epoch(self) -> u64 {
        (self.0 & !ABSENT_BIT) >> EPOCH_SHIFT
    }

    /// The sequence within the epoch.
    #[inline]
    pub const fn sequence(self) -> u16 {
        (self.0 >> SLOT_BITS) as u16
    }

    /// The slot of the session that committed it (and, under the per-worker
    /// scheme, its log partition).
    #[inline]
    pub const fn slot(self) -> u16 {
        self.0 as u16
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A byte position in one log stream: the bytes appended to the stream
/// before it, across its segment files (a segment is named by the position
/// of its first byte; positions start again at 0 after a clean close
/// removed the log).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LogPos(u64);

impl LogPos {
    /// The start of a stream.
    pub const ZERO: LogPos = LogPos(0);
    /// Beyond every position a stream reaches: never durable.
    pub const MAX: LogPos = LogPos(u64::MAX);

    #[inline]
    pub const fn new(raw: u64) -> LogPos {
        LogPos(raw)
    }

    /// The stored form.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The position `bytes` further on (added as the `u64`s are: a stream
    /// never reaches 2^64 bytes).
    #[inline]
    pub fn advance(self, bytes: u64) -> LogPos {
        LogPos(self.0 + bytes)
    }

    /// Bytes from `earlier` to this position.
    #[inline]
    pub fn bytes_since(self, earlier: LogPos) -> u64 {
        debug_assert!(earlier <= self, "{earlier} is after {self}");
        self.0 - earlier.0
    }
}

impl fmt::Display for LogPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout `txn::epoch::next_tid` and the stored records rely on.
    #[test]
    fn tid_parts_round_trip_and_order_by_epoch_first() {
        let t = Tid::from_parts(3, 5, 7);
        assert_eq!(t.get(), (3 << 32) | (5 << 16) | 7);
        assert_eq!((t.epoch(), t.sequence(), t.slot()), (3, 5, 7));
        assert!(t.is_committed());
        assert!(Tid::from_parts(4, 0, 0) > Tid::from_parts(3, u16::MAX, u16::MAX));
        let max = Tid::from_parts(Tid::MAX_EPOCH, u16::MAX, u16::MAX);
        assert!(!max.is_placeholder());
        assert_eq!(max.epoch(), Tid::MAX_EPOCH);
    }

    #[test]
    fn a_placeholder_is_neither_committed_nor_zero() {
        let p = Tid::placeholder(9);
        assert!(p.is_placeholder() && !p.is_committed());
        assert_ne!(p, Tid::ZERO);
        assert!(!Tid::ZERO.is_committed() && !Tid::ZERO.is_placeholder());
    }

    #[test]
    fn first_above_rounds_up_to_the_slot() {
        assert_eq!(Tid::first_above(Tid::ZERO, 3, 0), Tid::from_parts(3, 0, 0));
        let seen = Tid::from_parts(3, 5, 9);
        let next = Tid::first_above(seen, 3, 2);
        assert_eq!(next, Tid::from_parts(3, 6, 2));
        assert_eq!(Tid::first_above(seen, 4, 2), Tid::from_parts(4, 0, 2));
    }

    #[test]
    fn gsn_and_position_arithmetic() {
        assert_eq!(Gsn::new(4).next(), Gsn::new(5));
        assert_eq!(Gsn::new(4).plus(3), Gsn::new(7));
        assert_eq!(Gsn::ZERO.prev_or_zero(), Gsn::ZERO);
        assert_eq!(Gsn::new(4).prev_or_zero(), Gsn::new(3));
        assert_eq!(LogPos::new(10).advance(5), LogPos::new(15));
        assert_eq!(LogPos::new(15).bytes_since(LogPos::new(10)), 5);
        assert_eq!(format!("{} {} {}", Gsn::new(1), Tid::new(2), LogPos::new(3)), "1 2 3");
    }
}
