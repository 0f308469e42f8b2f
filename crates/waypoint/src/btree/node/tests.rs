//! Tests of the node format: round trips, space accounting, key order and
//! heads, `validate` against each broken invariant, splits and merges, and
//! property tests of random operations and of arbitrary bytes.

use super::keys::{cmp_keys, key_head};
use super::layout::*;
use crate::buffer::page::{self, PageKind, PAGE_HEADER_SIZE};
use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

const PS: usize = 4096;

fn page(ps: usize, kind: PageKind) -> Vec<u8> {
    let mut p = vec![0u8; ps];
    page::init_page(&mut p, 9, kind);
    p
}

fn leaf(ps: usize, lower: Fence, upper: Fence) -> Vec<u8> {
    let mut p = page(ps, PageKind::BtreeLeaf);
    NodeMut::new(&mut p).init_leaf(lower, upper);
    p
}

fn contents(n: Node) -> Entries {
    (0..n.count())
        .map(|i| (n.key(i).unwrap().to_vec(), n.value(i).unwrap().to_vec()))
        .collect()
}

fn value_bytes(len: usize, tag: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ tag).collect()
}

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    // A small alphabet makes shared 4-byte heads, prefixes and zero bytes
    // (which collide with head padding) common.
    prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xff]), 0..9)
}

/// Leaf filled in key order until NoSpace, fences just outside the keys.
fn filled_leaf(ps: usize, keys: &[Vec<u8>], vlen: usize) -> Vec<u8> {
    let mut p = leaf(ps, Fence::Key(b"\x01"), Fence::Infinite);
    let mut n = NodeMut::new(&mut p);
    for (j, k) in keys.iter().enumerate() {
        let i = n.as_node().count();
        if n.insert_at(i, k, &value_bytes(vlen + j % 7, j as u8))
            .is_err()
        {
            break;
        }
    }
    p
}

/// Keys > "\x01" in sorted order.
fn sorted_keys(raw: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = raw.into_iter().map(|k| [&[2u8][..], &k].concat()).collect();
    keys.sort();
    keys.dedup();
    keys
}

fn inner_with(ps: usize, keys: &[Vec<u8>], upper_child: u64) -> Vec<u8> {
    let mut p = page(ps, PageKind::BtreeInner);
    let mut n = NodeMut::new(&mut p);
    n.init_inner(Fence::Infinite, Fence::Key(b"\x03"), upper_child);
    for (j, k) in keys.iter().enumerate() {
        if n.insert_at(j, k, &(100 + j as u64).to_le_bytes()).is_err() {
            break;
        }
    }
    p
}

/// Calls every `Node` method; if `validate` accepts, the node must be usable.
fn exercise(node: Node, probes: &[Vec<u8>]) {
    let n = node.count();
    let _ = node.is_leaf();
    for i in 0..n + 2 {
        let _ = (node.key(i), node.value(i), node.child(i));
    }
    let _ = (node.lower_fence(), node.upper_fence(), node.upper_child());
    let _ = (node.free_space(), node.used_space(), node.fits(0, 0));
    let _ = node.fits(usize::MAX, usize::MAX);
    for p in probes {
        let _ = (node.lower_bound(p), node.child_for(p));
    }
    if node.validate().is_ok() {
        assert_eq!(
            node.used_space() + node.free_space() + NODE_HEADER_END,
            node.page_size()
        );
        let (lo, hi) = (node.lower_fence().unwrap(), node.upper_fence().unwrap());
        for i in 0..n {
            let k = node.key(i).unwrap();
            assert!(node.value(i).is_some());
            assert!(i == 0 || node.key(i - 1).unwrap() < k);
            assert!(!matches!(lo, Fence::Key(l) if k <= l));
            assert!(!matches!(hi, Fence::Key(h) if k > h));
            assert_eq!(node.lower_bound(k), Some((i, true)));
            if !node.is_leaf() {
                assert_eq!(node.child_for(k).map(|c| c.0), Some(i));
            }
        }
        if !node.is_leaf() {
            assert!(node.child(n).is_some());
        }
    }
}

/// A child split's separator lands beside the child, before it, with
/// the old entry now leading to the new right page; a separator for
/// another child, out of the fences, or on a leaf is refused unchanged.
#[test]
fn insert_separator_points_left_and_right_halves() {
    let keys: Vec<Vec<u8>> = [&b"\x02b"[..], b"\x02d", b"\x02f"]
        .iter()
        .map(|k| k.to_vec())
        .collect();
    let p = inner_with(PS, &keys, 7);
    let children = |p: &[u8]| {
        let n = Node::new(p);
        let mut out: Vec<(Vec<u8>, u64)> = (0..n.count())
            .map(|i| (n.key(i).unwrap().to_vec(), n.child(i).unwrap()))
            .collect();
        out.push((b"+inf".to_vec(), n.upper_child().unwrap()));
        out
    };
    // Child 101 covers (b, d]; it split at c into 101 | 200.
    let mut q = p.clone();
    NodeMut::new(&mut q)
        .insert_separator(b"\x02c", 101, 200)
        .unwrap();
    assert_eq!(
        children(&q),
        [
            (b"\x02b".to_vec(), 100),
            (b"\x02c".to_vec(), 101),
            (b"\x02d".to_vec(), 200),
            (b"\x02f".to_vec(), 102),
            (b"+inf".to_vec(), 7),
        ]
    );
    // The upper child (7, above f) split at g into 7 | 201.
    NodeMut::new(&mut q)
        .insert_separator(b"\x02g", 7, 201)
        .unwrap();
    assert_eq!(children(&q).last().unwrap(), &(b"+inf".to_vec(), 201));
    assert_eq!(children(&q)[4], (b"\x02g".to_vec(), 7));
    assert_eq!(Node::new(&q).validate(), Ok(()));
    for (sep, left) in [
        (&b"\x02c"[..], 100), // c lands beside 101, not 100
        (b"\x02d", 101),      // equal to an existing key
        (b"\x04", 7),         // above the upper fence
    ] {
        let mut r = p.clone();
        assert!(NodeMut::new(&mut r)
            .insert_separator(sep, left, 300)
            .is_err());
        assert_eq!(r, p, "{sep:?} changed the node");
    }
    let mut l = filled_leaf(PS, &keys, 3);
    let before = l.clone();
    assert!(NodeMut::new(&mut l)
        .insert_separator(b"\x02c", 101, 300)
        .is_err());
    assert_eq!(l, before);
}

#[test]
fn max_sizes_fit_for_every_page_size() {
    let mut ps = page::MIN_PAGE_SIZE;
    while ps <= page::MAX_PAGE_SIZE {
        let (mk, mv) = (max_key_len(ps), max_value_len(ps));
        let cap = ps - NODE_HEADER_END;
        assert!(2 * (SLOT_SIZE + mk + mv) + 2 * mk <= cap, "leaf at {ps}");
        assert!(3 * (SLOT_SIZE + mk + 8) + 2 * mk <= cap, "inner at {ps}");
        // And constructively, with the fences and keys actually stored.
        let key = |c: u8| vec![c; mk];
        let mut p = leaf(ps, Fence::Key(&key(1)), Fence::Key(&key(9)));
        let mut n = NodeMut::new(&mut p);
        n.insert_at(0, &key(2), &vec![7; mv]).unwrap();
        n.insert_at(1, &key(3), &vec![8; mv]).unwrap();
        assert_eq!(n.as_node().validate(), Ok(()));
        let mut right = page(ps, PageKind::Free);
        let at = n.split_index();
        assert_eq!(at, 0);
        let sep = n.split(at, &mut right);
        assert_eq!(sep, key(2));
        assert_eq!(Node::new(&right).validate(), Ok(()));
        let mut p = page(ps, PageKind::BtreeInner);
        let mut n = NodeMut::new(&mut p);
        n.init_inner(Fence::Key(&key(1)), Fence::Key(&key(9)), 5);
        for c in 0..3 {
            n.insert_at(c, &key(c as u8 + 2), &[c as u8; 8]).unwrap();
        }
        assert_eq!(n.as_node().validate(), Ok(()));
        assert_eq!(n.split_index(), 1);
        ps *= 2;
    }
}

#[test]
fn empty_key_value_and_fences_round_trip() {
    let mut p = leaf(PS, Fence::Infinite, Fence::Key(b""));
    let mut n = NodeMut::new(&mut p);
    n.insert_at(0, b"", b"").unwrap();
    assert_eq!(n.as_node().validate(), Ok(()));
    assert_eq!(n.as_node().lower_bound(b""), Some((0, true)));
    assert_eq!(n.as_node().upper_fence(), Some(Fence::Key(b"")));
    n.set_value_at(0, b"xyz").unwrap();
    n.set_value_at(0, b"").unwrap();
    n.compactify();
    assert_eq!(n.as_node().validate(), Ok(()));
    assert_eq!(contents(n.as_node()), vec![(vec![], vec![])]);
    n.remove_at(0);
    assert_eq!(n.as_node().free_space(), PS - NODE_HEADER_END);
}

#[test]
fn cmp_keys_agrees_with_memcmp() {
    let keys: [&[u8]; 10] = [
        b"",
        b"\0",
        b"a",
        b"abcdefgh",
        b"abcdefgh\0",
        b"abcdefgi",
        b"abcdefghabcdefgh",
        b"abcdefghabcdefgg\xff",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\x01",
        b"abcdefghabcdefghZ",
    ];
    for a in keys {
        for b in keys {
            assert_eq!(cmp_keys(a, b), a.cmp(b), "{a:?} {b:?}");
        }
    }
}

#[test]
fn key_heads_agree_with_memcmp() {
    assert_eq!(key_head(b"abcdef"), 0x6162_6364);
    assert_eq!(key_head(b"ab"), 0x6162_0000);
    let keys: [&[u8]; 7] = [b"", b"\0", b"a", b"a\0", b"a\0\0\0\x01", b"ab", b"abcd\xff"];
    for a in keys {
        for b in keys {
            if key_head(a) != key_head(b) {
                assert_eq!(key_head(a).cmp(&key_head(b)), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }
}

#[test]
fn validate_rejects_each_broken_invariant() {
    // Leaf ("\x01", "m"] with a -> "b" and b -> "" (key "b" is one byte).
    let mut base = leaf(PS, Fence::Key(b"\x01"), Fence::Key(b"m"));
    let mut n = NodeMut::new(&mut base);
    n.insert_at(0, b"a", b"b").unwrap();
    n.insert_at(1, b"b", b"").unwrap();
    assert_eq!(n.as_node().validate(), Ok(()));
    let slot = |i: usize| NODE_HEADER_END + i * SLOT_SIZE;
    let off0 = rd16(&base, slot(0)).unwrap();
    type Corrupt = fn(&mut Vec<u8>, usize, usize);
    let cases: [(&str, Corrupt); 12] = [
        ("kind", |p, _, _| p[6] = PageKind::FreeList as u8),
        ("page size", |p, _, _| p.truncate(PS - 1)),
        ("out of order", |p, _, s1| wr32(p, DATA_START, s1 - 1)),
        // Slot 1's key "b" re-pointed into slot 0's value: same bytes, same
        // lengths, so only the overlap check can see it.
        ("overlap", |p, off0, s1| wr16(p, s1, off0 + 1)),
        ("strictly increasing", |p, _, s1| {
            let (a, b) = (s1 - SLOT_SIZE, s1);
            let tmp: Vec<u8> = p[a..b].to_vec();
            p.copy_within(b..b + SLOT_SIZE, a);
            p[b..b + SLOT_SIZE].copy_from_slice(&tmp);
        }),
        ("above upper fence", |p, _, _| {
            let at = rd16(p, UPPER_OFF).unwrap();
            p[at] = b'a';
        }),
        ("not above lower fence", |p, _, _| {
            let at = rd16(p, LOWER_OFF).unwrap();
            p[at] = b'a';
        }),
        ("empty range", |p, _, _| wr16(p, UPPER_OFF + 2, 0)),
        ("infinite", |p, _, _| p[FLAGS] |= FLAG_LOWER_INF),
        ("lower fence is not below", |p, _, _| {
            let (off, len) = (rd16(p, UPPER_OFF).unwrap(), rd16(p, UPPER_OFF + 2).unwrap());
            wr16(p, LOWER_OFF, off);
            wr16(p, LOWER_OFF + 2, len);
        }),
        ("upper_child", |p, _, _| p[UPPER_CHILD] = 1),
        ("inner value length", |p, _, _| {
            page::set_page_kind(p, PageKind::BtreeInner)
        }),
    ];
    for (want, corrupt) in cases {
        let mut p = base.clone();
        corrupt(&mut p, off0, slot(1));
        let err = Node::new(&p).validate().expect_err(want);
        assert!(err.contains(want), "{want}: got {err}");
        exercise(Node::new(&p), &[b"a".to_vec(), b"z".to_vec()]);
    }
}

/// A split's separator is a key below the upper fence (a split keeps an
/// entry on each side), so redo of a split record naming the last key of a
/// node whose upper fence is that key is refused, the node unchanged: the
/// upper half would have equal fences, which `split` asserts against.
#[test]
fn split_keep_left_refuses_a_separator_equal_to_the_upper_fence() {
    let mut p = leaf(PS, Fence::Infinite, Fence::Key(b"c"));
    for (i, k) in [b"a", b"b", b"c"].into_iter().enumerate() {
        NodeMut::new(&mut p).insert_at(i, k, b"v").unwrap();
    }
    let before = p.clone();
    assert!(NodeMut::new(&mut p).split_keep_left(2, b"c").is_err());
    assert_eq!(p, before);
}

#[test]
fn merge_that_does_not_fit_leaves_both_unchanged() {
    let keys: Vec<Vec<u8>> = (0..200u16)
        .map(|i| [&[2u8][..], &i.to_be_bytes()].concat())
        .collect();
    let mut left = filled_leaf(PS, &keys, 60);
    let mut right = page(PS, PageKind::Free);
    let at = NodeMut::new(&mut left).split_index();
    let sep = NodeMut::new(&mut left).split(at, &mut right);
    let n = Node::new(&left).count();
    // Refill left's free space so the two no longer fit together.
    let mut l = NodeMut::new(&mut left);
    let extra = l.as_node().free_space() - SLOT_SIZE - 2;
    l.set_value_at(n - 1, &vec![1; extra]).unwrap();
    let (before_l, before_r) = (left.clone(), right.clone());
    let res = NodeMut::new(&mut left).merge_from_right(&Node::new(&right), &sep);
    assert_eq!(res, Err(NoSpace));
    assert_eq!((left, right), (before_l, before_r));
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>, usize),
    Remove(usize),
    Set(usize, usize),
    /// Insert/set sized to free space + delta - 1: probes the exact boundary.
    InsertExact(Vec<u8>, usize),
    SetExact(usize, usize),
    Compact,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (key_strategy(), 0..300usize).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), 0..400usize).prop_map(|(i, v)| Op::Set(i, v)),
        1 => (key_strategy(), 0..3usize).prop_map(|(k, d)| Op::InsertExact(k, d)),
        1 => (any::<usize>(), 0..3usize).prop_map(|(i, d)| Op::SetExact(i, d)),
        1 => Just(Op::Compact),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn model_leaf_ops_match_btreemap(
        ops in prop::collection::vec(op_strategy(), 1..150),
        big in any::<bool>(),
        fenced in any::<bool>(),
    ) {
        let ps = if big { 16384 } else { PS };
        // Fenced: keys get a 0x02 prefix and live strictly inside ("\x01", "\x03"].
        let (lower, upper) = if fenced {
            (Fence::Key(b"\x01"), Fence::Key(b"\x03"))
        } else {
            (Fence::Infinite, Fence::Infinite)
        };
        let mut p = leaf(ps, lower, upper);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (t, op) in ops.into_iter().enumerate() {
            let before = p.clone();
            let mut n = NodeMut::new(&mut p);
            let free = n.as_node().free_space();
            let op = match op {
                Op::InsertExact(k, d) => {
                    let klen = k.len() + fenced as usize;
                    Op::Insert(k, (free + d).saturating_sub(SLOT_SIZE + klen + 1))
                }
                Op::SetExact(i, d) if !model.is_empty() => {
                    let old = n.as_node().value(i % model.len()).unwrap().len();
                    Op::Set(i, (old + free + d).saturating_sub(1))
                }
                op => op,
            };
            match op {
                Op::Insert(k, vlen) => {
                    let k = if fenced { [&[2u8][..], &k].concat() } else { k };
                    let (i, found) = n.as_node().lower_bound(&k).unwrap();
                    prop_assert_eq!(found, model.contains_key(&k));
                    if !found {
                        let v = value_bytes(vlen, t as u8);
                        let fits = SLOT_SIZE + k.len() + v.len() <= free;
                        prop_assert_eq!(fits, n.as_node().fits(k.len(), v.len()));
                        match n.insert_at(i, &k, &v) {
                            Ok(()) => { prop_assert!(fits); model.insert(k, v); }
                            Err(NoSpace) => { prop_assert!(!fits); prop_assert!(p == before); }
                        }
                    }
                }
                Op::Remove(i) if !model.is_empty() => {
                    let i = i % model.len();
                    let k = model.keys().nth(i).unwrap().clone();
                    n.remove_at(i);
                    model.remove(&k);
                }
                Op::Set(i, vlen) if !model.is_empty() => {
                    let i = i % model.len();
                    let v = value_bytes(vlen, t as u8);
                    let old = n.as_node().value(i).unwrap().len();
                    let fits = vlen <= old || vlen - old <= free;
                    match n.set_value_at(i, &v) {
                        Ok(()) => { prop_assert!(fits); *model.values_mut().nth(i).unwrap() = v; }
                        Err(NoSpace) => { prop_assert!(!fits); prop_assert!(p == before); }
                    }
                }
                Op::Compact => {
                    let free = n.as_node().free_space();
                    n.compactify();
                    let node = n.as_node();
                    prop_assert_eq!(node.free_space(), free);
                    // After compaction all free space is one contiguous gap.
                    prop_assert_eq!(node.data_start() - NODE_HEADER_END - node.count() * SLOT_SIZE, free);
                }
                _ => {}
            }
            let node = Node::new(&p);
            prop_assert_eq!(node.validate(), Ok(()));
            let expect: Entries = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(contents(node), expect);
            prop_assert_eq!(node.used_space() + node.free_space() + NODE_HEADER_END, ps);
            prop_assert_eq!((node.lower_fence(), node.upper_fence()), (Some(lower), Some(upper)));
        }
    }

    #[test]
    fn heads_after_the_fences_common_prefix_keep_lower_bound_exact(
        prefix in key_strategy(),
        raw in prop::collection::vec(key_strategy(), 1..80),
        probes in prop::collection::vec(key_strategy(), 1..30),
    ) {
        // Fences prefix+1 and prefix+3 share exactly `prefix`; keys
        // prefix+2+... lie between them.
        let with = |b: u8, k: &[u8]| [&prefix[..], &[b], k].concat();
        let mut keys: Vec<Vec<u8>> = raw.iter().map(|k| with(2, k)).collect();
        keys.sort();
        keys.dedup();
        let (lo, hi) = (with(1, &[]), with(3, &[]));
        let mut lp = leaf(PS, Fence::Key(&lo), Fence::Key(&hi));
        let mut ip = page(PS, PageKind::BtreeInner);
        NodeMut::new(&mut ip).init_inner(Fence::Key(&lo), Fence::Key(&hi), 7);
        for p in [&mut lp, &mut ip] {
            let mut n = NodeMut::new(p);
            let leaf = n.as_node().is_leaf();
            for (j, k) in keys.iter().enumerate() {
                let v = if leaf { vec![j as u8; 3] } else { (100 + j as u64).to_le_bytes().to_vec() };
                if n.insert_at(j, k, &v).is_err() {
                    break;
                }
            }
        }
        // Probes inside the prefix, around it, and without it.
        let short = prefix[..prefix.len().saturating_sub(1)].to_vec();
        let probes: Vec<Vec<u8>> = probes
            .iter()
            .flat_map(|k| [with(2, k), with(0, k), with(0xff, k), k.clone()])
            .chain(keys.iter().cloned())
            .chain([prefix.clone(), short, lo.clone(), hi.clone()])
            .collect();
        for p in [&lp, &ip] {
            let node = Node::new(p);
            prop_assert_eq!(node.validate(), Ok(()));
            prop_assert_eq!(node.prefix_len(), prefix.len());
            let stored: Vec<&[u8]> = (0..node.count()).map(|i| node.key(i).unwrap()).collect();
            for probe in &probes {
                let want = stored.iter().position(|k| *k >= &probe[..]).unwrap_or(stored.len());
                let eq = want < stored.len() && stored[want] == &probe[..];
                prop_assert_eq!(node.lower_bound(probe), Some((want, eq)), "probe {:?}", probe);
            }
        }
    }

    /// Redo of a split's kept half (`split_keep_left`) leaves exactly the
    /// bytes `split` left on the page, for leaves and inner nodes, and
    /// refuses a separator that is not at its slot without a change.
    #[test]
    fn split_keep_left_redoes_the_left_half_of_split(
        raw in prop::collection::vec(key_strategy(), 3..80),
        pick in any::<prop::sample::Index>(),
    ) {
        let keys = sorted_keys(raw);
        prop_assume!(keys.len() >= 3);
        for p in [filled_leaf(PS, &keys, 3), inner_with(PS, &keys, 7)] {
            let n = Node::new(&p).count();
            let at = pick.index(n);
            let mut split = p.clone();
            let mut right = page(PS, PageKind::Free);
            let sep = NodeMut::new(&mut split).split(at, &mut right);
            let mut redone = p.clone();
            prop_assert_eq!(NodeMut::new(&mut redone).split_keep_left(at, &sep), Ok(()));
            prop_assert_eq!(&redone, &split);
            let mut wrong = p.clone();
            let other = if at > 0 { at - 1 } else { at + 1 };
            prop_assert!(NodeMut::new(&mut wrong).split_keep_left(other, &sep).is_err());
            prop_assert!(NodeMut::new(&mut wrong).split_keep_left(n, &sep).is_err());
            prop_assert_eq!(&wrong, &p);
        }
    }

    #[test]
    fn lower_bound_and_child_for_match_linear_scan(
        raw in prop::collection::vec(key_strategy(), 3..80),
        probes in prop::collection::vec(key_strategy(), 1..30),
    ) {
        let keys = sorted_keys(raw);
        prop_assume!(keys.len() >= 3);
        let lp = filled_leaf(PS, &keys, 3);
        let ip = inner_with(PS, &keys, 7);
        for p in [&lp, &ip] {
            let node = Node::new(p);
            prop_assert_eq!(node.validate(), Ok(()));
            let stored: Vec<&[u8]> = (0..node.count()).map(|i| node.key(i).unwrap()).collect();
            let probes = probes.iter().map(|k| [&[2u8][..], k].concat()).chain(keys.iter().cloned());
            for probe in probes {
                let want = stored.iter().position(|k| *k >= &probe[..]).unwrap_or(stored.len());
                let eq = want < stored.len() && stored[want] == &probe[..];
                prop_assert_eq!(node.lower_bound(&probe), Some((want, eq)));
                if !node.is_leaf() {
                    let child = if want == stored.len() { 7 } else { 100 + want as u64 };
                    prop_assert_eq!(node.child_for(&probe), Some((want, child)));
                } else {
                    prop_assert_eq!(node.child_for(&probe), None);
                }
            }
        }
    }

    /// Whatever the probe key and the (possibly stale) insert hint,
    /// the split point is legal, and a key right after the last insert
    /// splits at the insertion point.
    #[test]
    fn split_index_for_is_always_a_legal_split(
        raw in prop::collection::vec(key_strategy(), 3..120),
        probe in key_strategy(),
        hint in any::<u16>(),
        inner in any::<bool>(),
    ) {
        let keys = sorted_keys(raw);
        prop_assume!(keys.len() >= 3);
        let mut p = if inner { inner_with(PS, &keys, 7) } else { filled_leaf(PS, &keys, 20) };
        let n = Node::new(&p).count();
        let probe = [&[2u8][..], &probe].concat();
        let node = NodeMut::new(&mut p);
        let first = usize::from(inner);
        prop_assert!((first..n - 1).contains(&node.split_index_for(&probe)));
        wr16(node.page, INSERT_HINT, usize::from(hint));
        prop_assert!((first..n - 1).contains(&node.split_index_for(&probe)));
        if let Some((pos, false)) = node.as_node().lower_bound(&probe) {
            wr16(node.page, INSERT_HINT, pos);
            let at = node.split_index_for(&probe);
            let balanced = node.split_index();
            if pos > first && pos < n && pos > balanced {
                prop_assert_eq!(at, pos - 1);
            } else if pos < n {
                prop_assert_eq!(at, balanced);
            }
        }
    }

    #[test]
    fn split_then_merge_round_trips(
        raw in prop::collection::vec(key_strategy(), 3..120),
        vlen in 0..120usize,
        inner in any::<bool>(),
    ) {
        let keys = sorted_keys(raw);
        prop_assume!(keys.len() >= 3);
        let mut left = if inner { inner_with(PS, &keys, 7) } else { filled_leaf(PS, &keys, vlen) };
        let orig = left.clone();
        let o = Node::new(&orig);
        let n = o.count();
        let mut right = page(PS, PageKind::Free);
        page::set_page_id(&mut right, 77);
        let mut l = NodeMut::new(&mut left);
        let at = l.split_index();
        prop_assert!(at + 1 < n && (!inner || at >= 1), "at {} of {}", at, n);
        let sep = l.split(at, &mut right);
        prop_assert_eq!(&sep[..], o.key(at).unwrap());
        prop_assert_eq!(page::page_id(&right), 77);
        let (ln, rn) = (Node::new(&left), Node::new(&right));
        prop_assert_eq!(ln.validate(), Ok(()));
        prop_assert_eq!(rn.validate(), Ok(()));
        prop_assert_eq!(ln.lower_fence(), o.lower_fence());
        prop_assert_eq!(ln.upper_fence(), Some(Fence::Key(&sep)));
        prop_assert_eq!(rn.lower_fence(), Some(Fence::Key(&sep)));
        prop_assert_eq!(rn.upper_fence(), o.upper_fence());
        let all = contents(o);
        let left_end = if inner { at } else { at + 1 };
        prop_assert_eq!(contents(ln), all[..left_end].to_vec());
        prop_assert_eq!(contents(rn), all[at + 1..].to_vec());
        if inner {
            prop_assert_eq!(ln.upper_child(), o.child(at));
            prop_assert_eq!(rn.upper_child(), o.upper_child());
        }
        // split_index minimises the larger half over every legal split point,
        // measured on real splits.
        let larger = |at: usize| {
            let (mut l, mut r) = (orig.clone(), page(PS, PageKind::Free));
            NodeMut::new(&mut l).split(at, &mut r);
            Node::new(&l).used_space().max(Node::new(&r).used_space())
        };
        let best = (inner as usize..n - 1).map(larger).min().unwrap();
        prop_assert_eq!(ln.used_space().max(rn.used_space()), best);
        let right_copy = right.clone();
        NodeMut::new(&mut left).merge_from_right(&Node::new(&right), &sep).unwrap();
        prop_assert_eq!(right, right_copy);
        let m = Node::new(&left);
        prop_assert_eq!(m.validate(), Ok(()));
        prop_assert_eq!(contents(m), all);
        prop_assert_eq!(m.lower_fence(), o.lower_fence());
        prop_assert_eq!(m.upper_fence(), o.upper_fence());
        prop_assert_eq!(m.upper_child(), o.upper_child());
        prop_assert_eq!(m.used_space(), o.used_space());
    }

    #[test]
    fn node_methods_never_panic_on_random_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..5000),
        kind in 0u8..5,
        count in 0u16..500,
        probes in prop::collection::vec(key_strategy(), 1..4),
    ) {
        let mut p = bytes;
        exercise(Node::new(&p), &probes);
        if p.len() > NODE_HEADER_END {
            // Plausible header fields reach the slot and heap paths.
            p[6] = kind;
            p[COUNT..COUNT + 2].copy_from_slice(&count.to_le_bytes());
            exercise(Node::new(&p), &probes);
        }
    }

    #[test]
    fn corrupted_valid_nodes_never_panic_and_structural_flips_are_rejected(
        raw in prop::collection::vec(key_strategy(), 3..60),
        inner in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8u8), 1..4),
        writes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        probes in prop::collection::vec(key_strategy(), 1..4),
    ) {
        let keys = sorted_keys(raw);
        let valid = if inner { inner_with(PS, &keys, 7) } else { filled_leaf(PS, &keys, 20) };
        let n = Node::new(&valid).count();
        let slots_end = NODE_HEADER_END + n * SLOT_SIZE;
        // One bit flip in a field whose every change breaks an invariant:
        // live_heap, fence lengths of key fences, slot lengths and heads.
        for (idx, bit) in &flips {
            let mut p = valid.clone();
            let at = PAGE_HEADER_SIZE + idx.index(slots_end - PAGE_HEADER_SIZE);
            p[at] ^= 1 << bit;
            exercise(Node::new(&p), &probes);
            let rel = at.checked_sub(NODE_HEADER_END).map(|r| r % SLOT_SIZE);
            let must_reject = (LIVE_HEAP..LIVE_HEAP + 4).contains(&at)
                || at == RESERVED1
                || (at == FLAGS && *bit >= 2)
                || (!inner && (UPPER_CHILD..UPPER_CHILD + 8).contains(&at))
                || (LOWER_OFF + 2..LOWER_OFF + 4).contains(&at)
                || rel.is_some_and(|r| r >= 2);
            if must_reject {
                prop_assert!(Node::new(&p).validate().is_err(), "flip at {} bit {} accepted", at, bit);
            }
        }
        // Arbitrary overwrites anywhere, including the page header's kind byte.
        let mut p = valid.clone();
        for (idx, b) in &writes {
            p[idx.index(PS)] = *b;
        }
        exercise(Node::new(&p), &probes);
    }
}
