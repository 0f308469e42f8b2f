//! An update record's diff: the bytes of a value that changed, as up to
//! [`MAX_SPANS`] spans of before- and after-image, applied forward for redo
//! and backward for undo (seed 000 §3.6's undo information in the log;
//! §3.8's log compression: only the changed bytes are logged).
//!
//! Invariant: for every old and new value, the diff of the two applied to
//! the old value gives the new one and undone on the new value gives the
//! old one; spans are in offset order and do not overlap, and several
//! spans only where the value keeps its length.

use super::le_u64;

/// Most changed byte ranges one update record carries; more are merged
/// (closest first).
pub const MAX_SPANS: usize = 4;

/// An equal run shorter than this between two changed ranges is logged as
/// changed rather than paying a second span header (12 bytes) for it.
const SPAN_GAP: usize = 8;

/// One changed byte range: `before` at `offset` became `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span<'a> {
    pub offset: u32,
    pub before: &'a [u8],
    pub after: &'a [u8],
}

/// The changed bytes of an update, as up to [`MAX_SPANS`] spans in offset
/// order. A value that keeps its length may have several spans (a row
/// whose TID at the front and one field further on changed logs the two,
/// not everything between them), each with `before.len() == after.len()`,
/// so offsets are the same in the old and the new value; a value whose
/// length changes has exactly one span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateDiff<'a> {
    count: u8,
    spans: [Span<'a>; MAX_SPANS],
}

/// The diff between an old and a new value: strip their common prefix, then
/// the common suffix of what remains; for values of equal length, split
/// what is left at equal runs of at least `SPAN_GAP` bytes.
///
/// The suffix is measured on the tails after the prefix, so the two never
/// count the same byte twice: for old `aa` and new `aaa` the prefix is 2, and
/// measuring the suffix on the whole values would give 2 as well, which
/// would leave "minus one" changed bytes. Comparing the remaining tails
/// stops at the shorter one (here empty), so the diff is `before = ""`,
/// `after = "a"` at offset 2.
///
/// # Panics
/// If the common prefix is longer than `u32::MAX` (values are bounded by the
/// page size, far below that).
pub fn encode_update<'a>(old: &'a [u8], new: &'a [u8]) -> UpdateDiff<'a> {
    let prefix = common_prefix(old, new);
    let suffix = common_suffix(&old[prefix..], &new[prefix..]);
    let (end_old, end_new) = (old.len() - suffix, new.len() - suffix);
    let span = |start: usize, end: usize, end_new: usize| Span {
        offset: u32::try_from(start).expect("value shorter than 4 GiB"),
        before: &old[start..end],
        after: &new[start..end_new],
    };
    if old.len() != new.len() || end_old <= prefix {
        return UpdateDiff::single(span(prefix, end_old, end_new));
    }
    // Changed runs [start, end) of the equal-length middle, separated by
    // equal runs of at least SPAN_GAP bytes. Byte `prefix` differs, and so
    // does byte `end_old - 1`. Runs beyond MAX_SPANS merge across the
    // smallest gap as they come, which keeps the MAX_SPANS - 1 largest gaps
    // (the earliest of equal gaps merging first), with no allocation.
    let (old_mid, new_mid) = (&old[..end_old], &new[..end_old]);
    let mut runs = [(0usize, 0usize); MAX_SPANS + 1];
    let mut count = 0;
    let mut i = prefix;
    while i < end_old {
        let run_end = equal_window(old_mid, new_mid, i + 1, SPAN_GAP);
        runs[count] = (i, run_end);
        count += 1;
        if count > MAX_SPANS {
            let closest = (0..count - 1)
                .min_by_key(|&k| runs[k + 1].0 - runs[k].1)
                .expect("at least two runs");
            runs[closest].1 = runs[closest + 1].1;
            runs.copy_within(closest + 2..count, closest + 1);
            count -= 1;
        }
        i = common_prefix(&old_mid[run_end..], &new_mid[run_end..]) + run_end;
    }
    let mut diff = UpdateDiff::empty();
    for &(start, end) in &runs[..count] {
        diff.push(span(start, end, end));
    }
    diff
}

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = le_u64(&a[i..]) ^ le_u64(&b[i..]);
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the common suffix of `a` and `b`, eight bytes at a time.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut k = 0; // equal bytes at the end so far
    while k + 8 <= n {
        let at = n - k - 8;
        let x = le_u64(&a[at..]) ^ le_u64(&b[at..]);
        if x != 0 {
            return k + (x.leading_zeros() / 8) as usize;
        }
        k += 8;
    }
    k + a[..n - k]
        .iter()
        .rev()
        .zip(b[..n - k].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// The first position `p >= from` where `a` and `b` (of equal length) agree
/// on `gap` bytes in a row, or reach their end first; every byte in
/// `from - 1..p` that differs is then part of the run ending at `p`.
fn equal_window(a: &[u8], b: &[u8], from: usize, gap: usize) -> usize {
    debug_assert_eq!(gap, 8, "the word compare assumes a gap of 8 bytes");
    let n = a.len();
    let mut p = from;
    while p + 8 <= n {
        let x = le_u64(&a[p..]) ^ le_u64(&b[p..]);
        if x == 0 {
            return p;
        }
        // Any window starting at or before the highest differing byte of
        // this one contains it: the next candidate starts just after it.
        p += (63 - x.leading_zeros() as usize) / 8 + 1;
    }
    // Fewer than eight bytes left: the window reaches the end once they
    // hold no difference.
    match (p..n).rev().find(|&j| a[j] != b[j]) {
        Some(last) => last + 1,
        None => p,
    }
}

impl<'a> UpdateDiff<'a> {
    pub(super) fn empty() -> Self {
        UpdateDiff {
            count: 0,
            spans: [Span::default(); MAX_SPANS],
        }
    }

    /// A diff of one span.
    pub fn single(span: Span<'a>) -> Self {
        let mut diff = UpdateDiff::empty();
        diff.push(span);
        diff
    }

    pub(super) fn push(&mut self, span: Span<'a>) {
        assert!((self.count as usize) < MAX_SPANS, "too many spans");
        self.spans[self.count as usize] = span;
        self.count += 1;
    }

    pub fn spans(&self) -> &[Span<'a>] {
        &self.spans[..self.count as usize]
    }

    /// Bytes of before- and after-images together.
    pub fn image_bytes(&self) -> usize {
        self.spans()
            .iter()
            .map(|s| s.before.len() + s.after.len())
            .sum()
    }

    /// Redo: rebuild the new value from the old one. `None` when `old` does
    /// not hold each span's `before` at its offset (the record does not
    /// belong to this value).
    pub fn apply_update(&self, old: &[u8]) -> Option<Vec<u8>> {
        self.rewrite(old, |s| (s.before, s.after))
    }

    /// Undo: rebuild the old value from the new one. `None` when `new` does
    /// not hold each span's `after` at its offset.
    pub fn undo_update(&self, new: &[u8]) -> Option<Vec<u8>> {
        self.rewrite(new, |s| (s.after, s.before))
    }

    fn rewrite(
        &self,
        value: &[u8],
        sides: impl Fn(&Span<'a>) -> (&'a [u8], &'a [u8]),
    ) -> Option<Vec<u8>> {
        match self.spans() {
            [one] => {
                let (expect, with) = sides(one);
                splice(value, one.offset, expect, with)
            }
            spans => {
                // Several spans keep the length (checked at decode): rewrite
                // in place, checking each expected image.
                let mut out = value.to_vec();
                for s in spans {
                    let (expect, with) = sides(s);
                    let start = usize::try_from(s.offset).ok()?;
                    let end = start.checked_add(expect.len())?;
                    if expect.len() != with.len() || out.get(start..end)? != expect {
                        return None;
                    }
                    out[start..end].copy_from_slice(with);
                }
                Some(out)
            }
        }
    }
}

/// `value` with `expect` at `offset` replaced by `with`, if it is there.
fn splice(value: &[u8], offset: u32, expect: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(expect.len())?;
    if value.get(start..end)? != expect {
        return None;
    }
    let mut out = Vec::with_capacity(value.len() - expect.len() + with.len());
    out.extend_from_slice(&value[..start]);
    out.extend_from_slice(with);
    out.extend_from_slice(&value[end..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::record::{decode, encode, RecordBody, RecordHeader};
    use proptest::prelude::*;

    /// The diff's definition, byte by byte (what `encode_update` computed
    /// before it compared words): spans as (offset, before len, after len).
    fn bytewise_diff(old: &[u8], new: &[u8]) -> Vec<(u32, usize, usize)> {
        let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
        let suffix = old[prefix..]
            .iter()
            .rev()
            .zip(new[prefix..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let (end_old, end_new) = (old.len() - suffix, new.len() - suffix);
        if old.len() != new.len() || end_old <= prefix {
            return vec![(prefix as u32, end_old - prefix, end_new - prefix)];
        }
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut i = prefix;
        while i < end_old {
            let (start, mut end, mut equal) = (i, i, 0);
            while i < end_old && equal < SPAN_GAP {
                if old[i] == new[i] {
                    equal += 1;
                } else {
                    equal = 0;
                    end = i + 1;
                }
                i += 1;
            }
            runs.push((start, end));
            while i < end_old && old[i] == new[i] {
                i += 1;
            }
        }
        while runs.len() > MAX_SPANS {
            let closest = (0..runs.len() - 1)
                .min_by_key(|&k| runs[k + 1].0 - runs[k].1)
                .unwrap();
            runs[closest].1 = runs[closest + 1].1;
            runs.remove(closest + 1);
        }
        runs.iter()
            .map(|&(a, b)| (a as u32, b - a, b - a))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

    /// The word loops find the same prefix and suffix as a byte-by-byte
    /// walk, on values with long equal stretches and up to two
    /// differences anywhere.
    #[test]
    fn common_prefix_and_suffix_match_a_byte_walk(
        a in prop::collection::vec(any::<u8>(), 0..300),
        extra in prop::collection::vec(any::<u8>(), 0..40),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..3),
    ) {
        let mut b = a.clone();
        for (at, x) in &flips {
            if !b.is_empty() {
                let i = at.index(b.len());
                b[i] ^= x;
            }
        }
        let walk_prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let walk_suffix = a.iter().rev().zip(b.iter().rev()).take_while(|(x, y)| x == y).count();
        prop_assert_eq!(common_prefix(&a, &b), walk_prefix);
        prop_assert_eq!(common_suffix(&a, &b), walk_suffix);
        // Different lengths: the longer value's extra bytes at either end.
        let mut longer = b.clone();
        longer.extend(&extra);
        prop_assert_eq!(common_prefix(&a, &longer), walk_prefix);
        let mut front = extra.clone();
        front.extend(&b);
        prop_assert_eq!(common_suffix(&a, &front), walk_suffix);
    }

    #[test]
    fn update_diff_round_trips(
        old in prop::collection::vec(0u8..3, 0..40),
        new in prop::collection::vec(0u8..3, 0..40),
    ) {
        let diff = encode_update(&old, &new);
        prop_assert_eq!(diff.apply_update(&old), Some(new.clone()));
        prop_assert_eq!(diff.undo_update(&new), Some(old.clone()));
        // Only the changed bytes: no span can be shrunk at either end,
        // and spans are in order without overlap.
        let mut next = 0;
        for span in diff.spans() {
            if let (Some(b), Some(a)) = (span.before.first(), span.after.first()) {
                prop_assert_ne!(b, a);
            }
            if let (Some(b), Some(a)) = (span.before.last(), span.after.last()) {
                prop_assert_ne!(b, a);
            }
            prop_assert!(span.offset as usize >= next);
            next = span.offset as usize + span.before.len();
        }
        let unchanged = old.len() - diff.spans().iter().map(|s| s.before.len()).sum::<usize>();
        prop_assert_eq!(unchanged, new.len() - diff.spans().iter().map(|s| s.after.len()).sum::<usize>());
        let body = RecordBody::Update { key: b"k", diff };
        let mut buf = Vec::new();
        encode(&RecordHeader::default(), &body, &mut buf);
        prop_assert_eq!(decode(&buf).unwrap().body, body);
    }

    /// The word-at-a-time diff finds exactly the spans of the plain
    /// byte-by-byte definition (kept here as the reference).
    #[test]
    fn update_diff_matches_the_bytewise_definition(
        old in prop::collection::vec(prop::sample::select(vec![0u8, 0, 0, 1, 2]), 0..200),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..4), 0..30),
        grow in prop::collection::vec(0u8..3, 0..3),
    ) {
        let mut new = old.clone();
        for (at, by) in &flips {
            if !new.is_empty() {
                let i = at.index(new.len());
                new[i] = new[i].wrapping_add(*by);
            }
        }
        for diff_new in [new.clone(), [&new[..], &grow[..]].concat()] {
            let fast = encode_update(&old, &diff_new);
            let slow = bytewise_diff(&old, &diff_new);
            let spans: Vec<(u32, usize, usize)> = fast
                .spans()
                .iter()
                .map(|s| (s.offset, s.before.len(), s.after.len()))
                .collect();
            prop_assert_eq!(spans, slow);
        }
    }

    #[test]
    fn update_diff_of_an_edit_round_trips(
        // A small alphabet makes repeated bytes, where prefix and suffix
        // could overlap, common.
        old in prop::collection::vec(0u8..3, 0..60),
        at in any::<prop::sample::Index>(),
        cut in 0usize..10,
        insert in prop::collection::vec(0u8..3, 0..10),
    ) {
        // Realistic updates: one splice into a random value.
        let start = if old.is_empty() { 0 } else { at.index(old.len() + 1) };
        let end = (start + cut).min(old.len());
        let mut new = old[..start].to_vec();
        new.extend(&insert);
        new.extend(&old[end..]);
        let diff = encode_update(&old, &new);
        let before: usize = diff.spans().iter().map(|s| s.before.len()).sum();
        let after: usize = diff.spans().iter().map(|s| s.after.len()).sum();
        prop_assert!(before <= end - start);
        prop_assert!(after <= insert.len());
        prop_assert_eq!(diff.apply_update(&old), Some(new.clone()));
        prop_assert_eq!(diff.undo_update(&new), Some(old));
    }
    }

    #[test]
    fn update_diff_examples() {
        // (old, new, offset, before, after)
        type Case = (
            &'static [u8],
            &'static [u8],
            u32,
            &'static [u8],
            &'static [u8],
        );
        let cases: [Case; 7] = [
            (b"aa", b"aaa", 2, b"", b"a"),
            (b"aaa", b"aa", 2, b"a", b""),
            (b"abc", b"abc", 3, b"", b""),
            (b"", b"xy", 0, b"", b"xy"),
            (b"abcabc", b"abc", 3, b"abc", b""),
            (b"hello world", b"hello there world", 6, b"", b"there "),
            (b"0123456789", b"01x3456y89", 2, b"234567", b"x3456y"),
        ];
        for (old, new, offset, before, after) in cases {
            let diff = encode_update(old, new);
            assert_eq!(
                diff,
                UpdateDiff::single(Span {
                    offset,
                    before,
                    after
                }),
                "{old:?} -> {new:?}"
            );
            assert_eq!(diff.apply_update(old).as_deref(), Some(new));
            assert_eq!(diff.undo_update(new).as_deref(), Some(old));
        }
        // A row whose TID (front) and one field (far behind) changed logs
        // the two, not the bytes between them.
        let old_row: Vec<u8> = (0..200u8).collect();
        let mut new_row = old_row.clone();
        new_row[0..8].copy_from_slice(&[0xee; 8]);
        new_row[150] = 0xff;
        let diff = encode_update(&old_row, &new_row);
        assert_eq!(diff.spans().len(), 2, "{diff:?}");
        assert_eq!(diff.image_bytes(), 2 * (8 + 1));
        assert_eq!(diff.apply_update(&old_row).as_deref(), Some(&new_row[..]));
        assert_eq!(diff.undo_update(&new_row).as_deref(), Some(&old_row[..]));
        let body = RecordBody::Update { key: b"k", diff };
        let mut buf = Vec::new();
        encode(&RecordHeader::default(), &body, &mut buf);
        assert_eq!(decode(&buf).unwrap().body, body);
        // More changed runs than MAX_SPANS merge the closest ones.
        let mut many = old_row.clone();
        for at in [10, 30, 60, 100, 101, 190] {
            many[at] ^= 0x55;
        }
        let diff = encode_update(&old_row, &many);
        assert_eq!(diff.spans().len(), MAX_SPANS);
        assert_eq!(diff.apply_update(&old_row).as_deref(), Some(&many[..]));
        assert_eq!(diff.undo_update(&many).as_deref(), Some(&old_row[..]));
        // A diff refuses a value it does not describe.
        let diff = encode_update(b"abcdef", b"abXdef");
        assert_eq!(diff.apply_update(b"abYdef"), None);
        assert_eq!(diff.apply_update(b"ab"), None);
        assert_eq!(diff.undo_update(b"abcdef"), None);
    }
}
