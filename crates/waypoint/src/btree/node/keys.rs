//! Key order inside a node: memcmp order, and the 4-byte heads the slots
//! store after the fences' common prefix (docs/decisions/005-node-key-heads.md).
//! Invariant: when two heads differ, their order is the keys' order.

use std::cmp::Ordering;

/// Length of the longest common prefix of `a` and `b`.
pub(super) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The head a slot stores for `key` in a node with prefix length `p` (0 for
/// a key shorter than `p`, which a valid node never holds).
pub(super) fn head_at(key: &[u8], p: usize) -> u32 {
    key_head(key.get(p..).unwrap_or(&[]))
}

/// First 4 key bytes, zero-padded, as a big-endian integer.
pub(super) fn key_head(key: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    for (d, s) in b.iter_mut().zip(key) {
        *d = *s;
    }
    u32::from_be_bytes(b)
}

/// memcmp order, compared 8 bytes at a time without a libc call: with
/// short keys whose heads are equal (integer keys below 2^32 all have a zero
/// head) the call overhead of `memcmp` dominated the binary search.
pub(super) fn cmp_keys(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut ca, mut cb) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        let (x, y) = (
            u64::from_be_bytes(x.try_into().expect("8-byte chunk")),
            u64::from_be_bytes(y.try_into().expect("8-byte chunk")),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}
