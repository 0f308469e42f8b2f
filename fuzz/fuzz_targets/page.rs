//! Page decoding on arbitrary bytes: the page-header check
//! (`buffer::page::verify` and the header accessors), the superblock reader
//! (`db::Superblock::read`, through a simulated file) and every read
//! accessor of the B+-tree node view (`btree::node::Node`) over all slot
//! indices. None may panic; a node that `validate` accepts must also read
//! consistently (keys strictly increasing, `lower_bound` finds each key at
//! its own slot, `child_for` agrees with `lower_bound`, used + free space
//! add up), and compacting it must keep its contents.
//!
//! Input: byte 0 picks the page size (its value mod 5: 4, 8, 16, 32 or
//! 64 KiB) and, by its top bit, whether the page is sealed (checksum
//! rewritten) before the header check, so the checks behind the checksum
//! are reached; the rest is the page, zero-padded. The raw input (any
//! length) is also read as a node.
#![no_main]

use libfuzzer_sys::fuzz_target;
use waypoint::btree::node::{Fence, Node, NodeMut};
use waypoint::buffer::page::{self, PageCheckError, PAGE_FORMAT_VERSION};
use waypoint::db::Superblock;
use waypoint::io::{OpenMode, SimStorage, Storage};
use waypoint_fuzz::page_size_from;

fn read_node(bytes: &[u8]) {
    let node = Node::new(bytes);
    let n = node.count();
    assert!(n <= bytes.len() / 10, "count not clamped to the page");
    let _ = (node.page_size(), node.is_leaf());
    let (lower, upper) = (node.lower_fence(), node.upper_fence());
    let _ = (node.upper_child(), node.free_space(), node.used_space());
    let _ = (node.fits(0, 0), node.fits(usize::MAX, usize::MAX));
    let mut probes: Vec<&[u8]> = vec![b"", b"\0", b"\xff\xff\xff\xff\xff"];
    for f in [lower, upper].into_iter().flatten() {
        if let Fence::Key(k) = f {
            probes.push(k);
        }
    }
    for i in 0..=n + 1 {
        if let Some(k) = node.key(i) {
            probes.push(k);
        }
        let _ = node.value(i);
        let _ = node.child(i);
    }
    // Probe with the first key, the last key and a sample in between: a node
    // can have thousands of slots, and lower_bound is O(log n) per probe.
    let step = (probes.len() / 64).max(1);
    for k in probes.iter().step_by(step).chain(probes.last()) {
        let lb = node.lower_bound(k);
        if let Some((i, _)) = lb {
            assert!(i <= n);
        }
        let _ = node.child_for(k);
    }

    let valid = node.validate().is_ok();
    if !valid {
        return;
    }
    // A node validate accepts reads consistently.
    assert_eq!(
        node.used_space() + node.free_space(),
        bytes.len() - waypoint::btree::node::NODE_HEADER_END,
        "used + free space != page body"
    );
    let keys: Vec<&[u8]> = (0..n)
        .map(|i| node.key(i).expect("key of a valid node"))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys not increasing");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            node.lower_bound(k),
            Some((i, true)),
            "lower_bound misses key {i}"
        );
        let v = node.value(i).expect("value of a valid node");
        if !node.is_leaf() {
            assert_eq!(v.len(), 8);
            assert_eq!(node.child_for(k), Some((i, node.child(i).unwrap())));
        }
    }
    if !node.is_leaf() {
        assert!(node.child(n).is_some(), "inner node without upper child");
    }
    // Compaction keeps every key, value and fence.
    let mut copy = bytes.to_vec();
    NodeMut::new(&mut copy).compactify();
    let after = Node::new(&copy);
    if let Err(e) = after.validate() {
        panic!("compactify broke a valid node: {e}");
    }
    assert_eq!(after.count(), n);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(after.key(i), Some(*k));
        assert_eq!(after.value(i), node.value(i));
    }
    assert_eq!(after.lower_fence(), lower);
    assert_eq!(after.upper_fence(), upper);
}

fn check_header(p: &[u8]) {
    let id = page::page_id(p);
    let _ = (page::page_gsn(p), page::page_kind(p));
    match page::verify(p, id) {
        Ok(()) => {
            assert!(page::page_kind(p).is_some());
            assert_eq!(u16::from_le_bytes([p[4], p[5]]), PAGE_FORMAT_VERSION);
            // The same page at another position is refused.
            assert_eq!(
                page::verify(p, id.wrapping_add(1)),
                Err(PageCheckError::WrongId { found: id })
            );
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

fn check_superblock(p: &[u8]) {
    let sim = SimStorage::new(0);
    let file = sim
        .open(std::path::Path::new("/data.waypoint"), OpenMode::CreateNew)
        .expect("create a simulated file");
    file.write_at(p, 0).expect("write to a simulated file");
    if let Ok(sb) = Superblock::read(file.as_ref()) {
        assert!(sb.page_size as usize <= p.len());
    }
}

fuzz_target!(|data: &[u8]| {
    read_node(data);
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let size = page_size_from(sel);
    let mut p = vec![0u8; size];
    let n = rest.len().min(size);
    p[..n].copy_from_slice(&rest[..n]);
    let seal = sel & 0x80 != 0;
    if seal {
        page::seal(&mut p);
    }
    check_header(&p);
    read_node(&p);
    check_superblock(&p);
});
