//! The catalog: tables and secondary indexes by name, stored in a B+-tree
//! whose root is page 1 of the data file, so it is recovered with the data.
//!
//! Catalog entry: key = name (UTF-8), value =
//! `[kind u8: 1 table, 2 index][id u32][root page u64]` and, for an index,
//! `[table name length u16][table name]`. The empty key (no name can be
//! empty) holds the id high-water mark, `[3][next id u32][0 u64]`.
//!
//! Invariant: an id is never given twice, even across a drop and a
//! recovery. The value-logging schemes log rows by table id; were a
//! dropped table's id given to a new table, the next replay would put the
//! dropped table's logged rows into the new one. So the next id is stored,
//! not derived from the live entries (which forget dropped ids).
//!
//! A secondary index maps `escape(secondary key) ++ primary key` to an empty
//! value. `escape` keeps memcmp order by secondary key first (0x00 becomes
//! 0x00 0xFF, and 0x00 0x00 terminates), so entries of one secondary key are
//! contiguous and ordered by primary key. Index keys are derived from row
//! values by an extractor the application gives when it opens the index; a
//! process that has not bound an index may not write its table, so an
//! index never silently goes stale.

use crate::btree::{BTree, PageLog, RootId};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::ids::Tid;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Derives the secondary key of a row from its primary key and value;
/// `None` leaves the row out of the index (a partial index).
pub type KeyExtractor = Arc<dyn Fn(&[u8], &[u8]) -> Option<Vec<u8>> + Send + Sync>;

pub const CATALOG_ROOT: RootId = 1;
const KIND_TABLE: u8 = 1;
const KIND_INDEX: u8 = 2;
const KIND_NEXT_ID: u8 = 3;
/// The key of the id high-water mark: no table or index name is empty.
const NEXT_ID_KEY: &[u8] = b"";
pub const MAX_NAME_LEN: usize = 255;

pub(crate) struct TableInfo {
    pub id: u32,
    pub name: String,
    pub tree: BTree,
    pub indexes: RwLock<Vec<Arc<IndexInfo>>>,
    pub dropped: AtomicBool,
}

pub(crate) struct IndexInfo {
    pub id: u32,
    pub name: String,
    pub tree: BTree,
    pub table: Arc<TableInfo>,
    pub extractor: RwLock<Option<KeyExtractor>>,
    pub dropped: AtomicBool,
    /// Its entries may not match its table (a recovery restored the table
    /// only): rebuilt when its extractor is bound.
    pub stale: AtomicBool,
}

impl TableInfo {
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::TableDropped);
        }
        Ok(())
    }
}

impl IndexInfo {
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) || self.table.dropped.load(Ordering::Acquire) {
            return Err(Error::TableDropped);
        }
        Ok(())
    }
}

/// A table of the database. Cheap to clone; refers to the table by id, so
/// a handle to a dropped table fails with `TableDropped`.
#[derive(Clone)]
pub struct Table {
    pub(crate) info: Arc<TableInfo>,
}

impl Table {
    pub fn name(&self) -> &str {
        &self.info.name
    }
    pub fn id(&self) -> u32 {
        self.info.id
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({:?}, id {})", self.info.name, self.info.id)
    }
}

/// A secondary index of a table.
#[derive(Clone)]
pub struct Index {
    pub(crate) info: Arc<IndexInfo>,
}

impl Index {
    pub fn name(&self) -> &str {
        &self.info.name
    }
    pub fn table_name(&self) -> &str {
        &self.info.table.name
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Index({:?} on {:?})",
            self.info.name, self.info.table.name
        )
    }
}

/// In-memory view of the catalog tree.
#[derive(Default)]
pub(crate) struct Catalog {
    pub tables: BTreeMap<String, Arc<TableInfo>>,
    pub indexes: BTreeMap<String, Arc<IndexInfo>>,
    pub next_id: u32,
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_NAME_LEN {
        "longer than 255 bytes"
    } else if name.chars().any(char::is_control) {
        "contains control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: name.chars().take(64).collect(),
        reason,
    })
}

fn encode_entry(kind: u8, id: u32, root: RootId, table: Option<&str>) -> Vec<u8> {
    let mut v = vec![kind];
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&root.to_le_bytes());
    if let Some(t) = table {
        v.extend_from_slice(&(t.len() as u16).to_le_bytes());
        v.extend_from_slice(t.as_bytes());
    }
    v
}

impl Catalog {
    /// Read every entry of the catalog tree.
    pub(crate) fn load(pool: &BufferPool) -> Result<Catalog> {
        let tree = BTree::open(CATALOG_ROOT);
        let mut raw = Vec::new();
        tree.scan(
            pool,
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            &mut |k, _, v| {
                raw.push((k.to_vec(), v.to_vec()));
                true
            },
        )?;
        let bad = |detail: String| Error::Corruption {
            path: pool.file().path().to_path_buf(),
            offset: CATALOG_ROOT * pool.page_size() as u64,
            detail,
        };
        let mut catalog = Catalog {
            next_id: 1,
            ..Default::default()
        };
        let mut pending_indexes = Vec::new();
        for (k, v) in raw {
            let name = String::from_utf8(k).map_err(|_| bad("catalog name is not UTF-8".into()))?;
            if v.len() < 13 {
                return Err(bad(format!("catalog entry {name:?} is truncated")));
            }
            let id = u32::from_le_bytes(v[1..5].try_into().expect("4 bytes"));
            let root = u64::from_le_bytes(v[5..13].try_into().expect("8 bytes"));
            if name.is_empty() {
                if v[0] != KIND_NEXT_ID {
                    return Err(bad(format!("catalog entry \"\" has kind {}", v[0])));
                }
                catalog.next_id = catalog.next_id.max(id);
                continue;
            }
            catalog.next_id = catalog.next_id.max(id + 1);
            match v[0] {
                KIND_TABLE => {
                    catalog.tables.insert(
                        name.clone(),
                        Arc::new(TableInfo {
                            id,
                            name,
                            tree: BTree::open(root),
                            indexes: RwLock::new(Vec::new()),
                            dropped: AtomicBool::new(false),
                        }),
                    );
                }
                KIND_INDEX => {
                    let len = v
                        .get(13..15)
                        .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
                        .ok_or_else(|| bad(format!("index entry {name:?} is truncated")))?;
                    let table = v
                        .get(15..15 + len)
                        .and_then(|b| std::str::from_utf8(b).ok())
                        .ok_or_else(|| bad(format!("index entry {name:?} is truncated")))?
                        .to_string();
                    pending_indexes.push((name, id, root, table));
                }
                other => {
                    return Err(bad(format!(
                        "catalog entry {name:?} has unknown kind {other}"
                    )))
                }
            }
        }
        for (name, id, root, table) in pending_indexes {
            let table =
                catalog.tables.get(&table).cloned().ok_or_else(|| {
                    bad(format!("index {name:?} refers to missing table {table:?}"))
                })?;
            let info = Arc::new(IndexInfo {
                id,
                name: name.clone(),
                tree: BTree::open(root),
                table: Arc::clone(&table),
                extractor: RwLock::new(None),
                dropped: AtomicBool::new(false),
                stale: AtomicBool::new(false),
            });
            table.indexes.write().push(Arc::clone(&info));
            catalog.indexes.insert(name, info);
        }
        Ok(catalog)
    }

    /// Never give an id below `next` (what another copy of the catalog
    /// had given), storing the mark.
    pub(crate) fn reserve_ids_below(
        &mut self,
        pool: &BufferPool,
        log: &dyn PageLog,
        next: u32,
    ) -> Result<()> {
        match next.checked_sub(1) {
            Some(last) => self.advance_next_id(pool, log, last),
            None => Ok(()),
        }
    }

    /// Move the next id past `id` (given now, or replayed) and store it
    /// in the catalog tree, with the entry that gives `id`: so no later
    /// open derives a smaller next id from the live entries alone.
    fn advance_next_id(&mut self, pool: &BufferPool, log: &dyn PageLog, id: u32) -> Result<()> {
        let next = id.checked_add(1).ok_or_else(|| Error::Internal {
            what: "catalog ids exhausted".into(),
        })?;
        if next <= self.next_id {
            return Ok(());
        }
        self.next_id = next;
        let value = encode_entry(KIND_NEXT_ID, next, 0, None);
        let tree = BTree::open(CATALOG_ROOT);
        if !tree.update(pool, log, NEXT_ID_KEY, Tid::ZERO, &value, None)? {
            tree.insert(pool, log, NEXT_ID_KEY, Tid::ZERO, &value, None)?;
        }
        Ok(())
    }

    pub(crate) fn name_taken(&self, name: &str) -> bool {
        self.tables.contains_key(name) || self.indexes.contains_key(name)
    }

    /// Add table `name`, with the next id or (a replayed change) `id`.
    pub(crate) fn add_table(
        &mut self,
        pool: &BufferPool,
        log: &dyn PageLog,
        name: &str,
        id: Option<u32>,
    ) -> Result<Arc<TableInfo>> {
        let tree = BTree::create(pool, log)?;
        let id = id.unwrap_or(self.next_id);
        BTree::open(CATALOG_ROOT).insert(
            pool,
            log,
            name.as_bytes(),
            Tid::ZERO,
            &encode_entry(KIND_TABLE, id, tree.root(), None),
            None,
        )?;
        self.advance_next_id(pool, log, id)?;
        let info = Arc::new(TableInfo {
            id,
            name: name.to_string(),
            tree,
            indexes: RwLock::new(Vec::new()),
            dropped: AtomicBool::new(false),
        });
        self.tables.insert(name.to_string(), Arc::clone(&info));
        Ok(info)
    }

    pub(crate) fn add_index(
        &mut self,
        pool: &BufferPool,
        log: &dyn PageLog,
        name: &str,
        table: &Arc<TableInfo>,
        extractor: Option<KeyExtractor>,
        id: Option<u32>,
    ) -> Result<Arc<IndexInfo>> {
        let tree = BTree::create(pool, log)?;
        let id = id.unwrap_or(self.next_id);
        BTree::open(CATALOG_ROOT).insert(
            pool,
            log,
            name.as_bytes(),
            Tid::ZERO,
            &encode_entry(KIND_INDEX, id, tree.root(), Some(&table.name)),
            None,
        )?;
        self.advance_next_id(pool, log, id)?;
        let info = Arc::new(IndexInfo {
            id,
            name: name.to_string(),
            tree,
            table: Arc::clone(table),
            extractor: RwLock::new(extractor),
            dropped: AtomicBool::new(false),
            stale: AtomicBool::new(false),
        });
        table.indexes.write().push(Arc::clone(&info));
        self.indexes.insert(name.to_string(), Arc::clone(&info));
        Ok(info)
    }

    pub(crate) fn remove_index(
        &mut self,
        pool: &BufferPool,
        log: &dyn PageLog,
        name: &str,
    ) -> Result<()> {
        let info = self
            .indexes
            .remove(name)
            .ok_or_else(|| Error::UnknownTable { name: name.into() })?;
        info.dropped.store(true, Ordering::Release);
        info.table.indexes.write().retain(|i| i.id != info.id);
        BTree::open(CATALOG_ROOT).remove(pool, log, name.as_bytes(), None)?;
        info.tree.destroy(pool)
    }

    pub(crate) fn remove_table(
        &mut self,
        pool: &BufferPool,
        log: &dyn PageLog,
        name: &str,
    ) -> Result<()> {
        let info = self
            .tables
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTable { name: name.into() })?;
        let index_names: Vec<String> = info.indexes.read().iter().map(|i| i.name.clone()).collect();
        for index in index_names {
            self.remove_index(pool, log, &index)?;
        }
        self.tables.remove(name);
        info.dropped.store(true, Ordering::Release);
        BTree::open(CATALOG_ROOT).remove(pool, log, name.as_bytes(), None)?;
        info.tree.destroy(pool)
    }
}

// ---------------------------------------------------------------------
// Secondary index keys
// ---------------------------------------------------------------------

/// `escape(secondary)` without its terminator: the prefix shared by all
/// index keys whose secondary key starts with `secondary`.
fn escape_open(secondary: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(secondary.len() + 4);
    for &b in secondary {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out
}

/// The full index key of (secondary, primary).
pub(crate) fn index_key(secondary: &[u8], primary: &[u8]) -> Vec<u8> {
    let mut out = escape_open(secondary);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(primary);
    out
}

/// Split an index key into (secondary, primary).
pub(crate) fn split_index_key(key: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut secondary = Vec::with_capacity(key.len());
    let mut i = 0;
    while i < key.len() {
        let b = key[i];
        if b == 0 {
            match key.get(i + 1)? {
                0 => return Some((secondary, &key[i + 2..])),
                0xFF => {
                    secondary.push(0);
                    i += 2;
                    continue;
                }
                _ => return None,
            }
        }
        secondary.push(b);
        i += 1;
    }
    None
}

/// Index-key bounds covering the secondary-key bounds given.
pub(crate) fn index_bounds(
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    // All keys of secondary s lie in [open(s)++00 00, open(s)++00 01).
    let after = |s: &[u8]| {
        let mut k = escape_open(s);
        k.extend_from_slice(&[0, 1]);
        k
    };
    let at = |s: &[u8]| {
        let mut k = escape_open(s);
        k.extend_from_slice(&[0, 0]);
        k
    };
    let lo = match lower {
        Bound::Included(s) => Bound::Included(at(s)),
        Bound::Excluded(s) => Bound::Included(after(s)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let hi = match upper {
        Bound::Included(s) => Bound::Excluded(after(s)),
        Bound::Excluded(s) => Bound::Excluded(at(s)),
        Bound::Unbounded => Bound::Unbounded,
    };
    (lo, hi)
}

/// The smallest key greater than every key starting with `prefix`, if any.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::ops::RangeBounds;

    proptest! {
        #[test]
        fn index_keys_sort_by_secondary_then_primary(
            a in proptest::collection::vec(any::<u8>(), 0..6),
            b in proptest::collection::vec(any::<u8>(), 0..6),
            pa in proptest::collection::vec(any::<u8>(), 0..4),
            pb in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let ka = index_key(&a, &pa);
            let kb = index_key(&b, &pb);
            prop_assert_eq!(ka.cmp(&kb), (&a, &pa).cmp(&(&b, &pb)));
            let (sa, ppa) = split_index_key(&ka).unwrap();
            prop_assert_eq!(&sa, &a);
            prop_assert_eq!(ppa, &pa[..]);
        }

        #[test]
        fn index_bounds_select_exactly_the_secondary_range(
            s in proptest::collection::vec(0u8..3, 0..4),
            lo in proptest::collection::vec(0u8..3, 0..4),
            hi in proptest::collection::vec(0u8..3, 0..4),
            p in proptest::collection::vec(any::<u8>(), 0..3),
            lo_incl in any::<bool>(),
            hi_incl in any::<bool>(),
        ) {
            let lower = if lo_incl { Bound::Included(&lo[..]) } else { Bound::Excluded(&lo[..]) };
            let upper = if hi_incl { Bound::Included(&hi[..]) } else { Bound::Excluded(&hi[..]) };
            let expected = (lower, upper).contains(&s[..]);
            let (il, iu) = index_bounds(lower, upper);
            let k = index_key(&s, &p);
            let got = (il.as_ref().map(|v| &v[..]), iu.as_ref().map(|v| &v[..])).contains(&k[..]);
            prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn prefix_successor_works() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
    }
}
