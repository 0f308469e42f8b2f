//! Taking a snapshot (seed 001 §II-C1): mark its point in the serial
//! order, then write every table as it was at the point while calls go on.
//!
//! The point: every partition lock (`SerialOrder::enter(All)`, what a
//! multi-partition call takes) and the catalog lock are held for as long
//! as it takes to note the catalog, the command log's last sequence number
//! and appended position, and to activate the shadow; execution pauses
//! for that only. No call is half-way then (a call holds its partition
//! from before it begins until its record is appended), and catalog
//! changes are logged under the catalog lock, so the log splits exactly
//! at the noted position: what precedes it is in the snapshot, what
//! follows is replayed on top.
//!
//! The write: a file per table, or per key range of a table larger than
//! `PART_BYTES` (`persist::resident::snapshot_file`, `table_file`), the
//! table read in key-ordered batches, each an ordinary shared-latch scan
//! under the shared side of the quiesce lock (so a dropped tree is never
//! read after its pages were freed), then merged with the shadow's
//! pre-images of the key range the batch covered (`shadow`): a key with a
//! pre-image is written from it (or skipped, absent at the point),
//! otherwise from the tree (placeholders skipped). Indexes are not
//! written: recovery rebuilds them from their tables, as VoltDB does.
//!
//! Invariant: each table file holds exactly the table's rows at the point,
//! each once, in key order.

use super::shadow::PreImage;
use super::{snapshot_dir, table_file, SnapshotStage, Snapshotter, CATALOG_FILE};
use crate::btree::BTree;
use crate::catalog::TableInfo;
use crate::error::Result;
use crate::ids::Tid;
use crate::persist::resident::create_dir;
use crate::persist::resident::snapshot_file::SnapshotWriter;
use crate::persist::SchemeKind;
use crate::procedure::Partition;
use crate::txn::shared::DbShared;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Rows the writer reads per scan (under one shared quiesce lock).
const BATCH_ROWS: usize = 256;
/// Bytes it reads per scan, at most about.
const BATCH_BYTES: usize = 1 << 20;

/// Where a snapshot stands in the log (its catalog file's meta record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Point {
    pub id: u64,
    /// The log generation the point is in.
    pub generation: u64,
    /// The command log's appended position at the point: records before
    /// it are in the snapshot.
    pub position: u64,
    /// The last call's sequence number at the point.
    pub sequence: u64,
    /// The catalog's next id at the point.
    pub next_id: u32,
    /// The epoch clock when the writer ended: every TID in the files is
    /// of an epoch at or below it.
    pub epoch: u64,
}

impl Point {
    pub const ENCODED: usize = 48;

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::ENCODED);
        for v in [
            self.id,
            self.generation,
            self.position,
            self.sequence,
            u64::from(self.next_id),
            self.epoch,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Point> {
        if bytes.len() != Self::ENCODED {
            return None;
        }
        let at = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Some(Point {
            id: at(0),
            generation: at(1),
            position: at(2),
            sequence: at(3),
            next_id: u32::try_from(at(4)).ok()?,
            epoch: at(5),
        })
    }
}

/// A snapshot written and synced, not installed.
#[derive(Debug, Clone)]
pub(super) struct Written {
    pub point: Point,
    pub bytes: u64,
    pub rows: u64,
}

/// The catalog at the point, and the trees to write.
struct Marked {
    point: Point,
    tables: Vec<Arc<TableInfo>>,
    /// (id, name, table name).
    indexes: Vec<(u32, String, String)>,
}

fn mark(sn: &Snapshotter, db: &DbShared, id: u64) -> Marked {
    let _all = sn.order.enter(Partition::All);
    let catalog = db.catalog.lock();
    let (sequence, position) = sn.log.point();
    sn.shadow.begin();
    Marked {
        point: Point {
            id,
            generation: sn.generation,
            position: position.get(),
            sequence,
            next_id: catalog.next_id,
            epoch: 0,
        },
        tables: catalog.tables.values().cloned().collect(),
        indexes: catalog
            .indexes
            .values()
            .map(|i| (i.id, i.name.clone(), i.table.name.clone()))
            .collect(),
    }
}

/// Mark the point and write snapshot `id`; `None` if stopped first or a
/// table was dropped meanwhile (its rows would be half there).
pub(super) fn take(sn: &Snapshotter, db: &DbShared, id: u64) -> Result<Option<Written>> {
    let storage = sn.storage.as_ref();
    let dir = snapshot_dir(&sn.dir, id);
    create_dir(storage, &sn.dir.join(super::SNAPSHOTS_DIR))?;
    create_dir(storage, &dir)?;
    let marked = mark(sn, db, id);
    sn.stage(SnapshotStage::Marked);
    let written = write_tables(sn, db, &dir, &marked);
    sn.shadow.end();
    let Some((bytes, rows, parts)) = written? else {
        return Ok(None);
    };
    let point = Point {
        epoch: db.epoch.current(),
        ..marked.point
    };
    let mut w = SnapshotWriter::create(storage, &dir.join(CATALOG_FILE), SchemeKind::Command, 0)?;
    for t in &marked.tables {
        w.table(t.id, &t.name)?;
    }
    // Written after the table files: recovery refuses a snapshot missing
    // any of them (a lost last part would otherwise load a shorter table).
    for (table, n) in parts {
        w.parts(table, n)?;
    }
    // No index rows are written: stale, rebuilt at load.
    for (id, name, table) in &marked.indexes {
        w.index(*id, name, table, true)?;
    }
    w.meta(&point.encode())?;
    let bytes = bytes + w.finish()?.bytes;
    // The files' names, durable.
    storage.sync_dir(&dir)?;
    Ok(Some(Written {
        point,
        bytes,
        rows,
    }))
}

/// Bytes and rows written, and each table's (id, part files).
type TablesWritten = (u64, u64, Vec<(u32, u32)>);

fn write_tables(
    sn: &Snapshotter,
    db: &DbShared,
    dir: &std::path::Path,
    marked: &Marked,
) -> Result<Option<TablesWritten>> {
    let (mut bytes, mut rows) = (0, 0);
    let mut parts = Vec::with_capacity(marked.tables.len());
    for t in &marked.tables {
        let mut files = TableFiles {
            storage: sn.storage.as_ref(),
            dir,
            table: t.id,
            part: 0,
            bytes: 0,
            part_bytes: sn.part_bytes.load(Ordering::Relaxed),
        };
        let mut w = files.create()?;
        let Some(n) = write_table(sn, db, t, &mut w, &mut files)? else {
            return Ok(None);
        };
        rows += n;
        bytes += files.bytes + w.finish()?.bytes;
        parts.push((t.id, files.part + 1));
        sn.stage(SnapshotStage::Table { table: t.id, rows: n });
    }
    Ok(Some((bytes, rows, parts)))
}

/// The part files of one table being written (`table_file`).
struct TableFiles<'a> {
    storage: &'a dyn crate::io::Storage,
    dir: &'a std::path::Path,
    table: u32,
    /// The part being written.
    part: u32,
    /// Bytes of the parts finished.
    bytes: u64,
    /// A part is finished beyond this (`PART_BYTES`).
    part_bytes: u64,
}

impl TableFiles<'_> {
    fn create(&self) -> Result<SnapshotWriter> {
        let path = table_file(self.dir, self.table, self.part);
        SnapshotWriter::create(self.storage, &path, SchemeKind::Command, self.part)
    }

    /// Between two batches: once the part holds `part_bytes`, finish it
    /// and go on in the next (each key stays in one file: the batches
    /// follow each other in key order).
    fn roll(&mut self, w: &mut SnapshotWriter) -> Result<()> {
        if w.written_len() < self.part_bytes {
            return Ok(());
        }
        self.part += 1;
        let next = self.create()?;
        self.bytes += std::mem::replace(w, next).finish()?.bytes;
        Ok(())
    }
}

/// A row the tree held: key, TID, value.
type TreeRow = (Vec<u8>, Tid, Vec<u8>);

/// Write `t`'s rows at the point; `None` if stopped or dropped.
fn write_table(
    sn: &Snapshotter,
    db: &DbShared,
    t: &TableInfo,
    w: &mut SnapshotWriter,
    files: &mut TableFiles<'_>,
) -> Result<Option<u64>> {
    let tree: BTree = t.tree;
    let mut rows = 0u64;
    let mut after: Option<Vec<u8>> = None;
    let mut batch: Vec<TreeRow> = Vec::with_capacity(BATCH_ROWS);
    loop {
        if sn.stopped() {
            return Ok(None);
        }
        batch.clear();
        let mut more = false;
        {
            let _q = db.quiesce.read();
            if t.dropped.load(Ordering::Acquire) {
                return Ok(None);
            }
            let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let mut size = 0;
            tree.scan(&db.pool, lower, Bound::Unbounded, false, &mut |k, tid, v| {
                if batch.len() >= BATCH_ROWS || size >= BATCH_BYTES {
                    more = true;
                    return false;
                }
                size += k.len() + v.len();
                batch.push((k.to_vec(), tid, v.to_vec()));
                true
            })?;
        }
        // The batch covers (after, its last key], or everything after
        // `after` if it was the last; the shadow is read only now, after
        // the tree (see `shadow`).
        let upto = if more { batch.last().map(|(k, _, _)| k.as_slice()) } else { None };
        let shadow = sn.shadow.range(t.id, after.as_deref(), upto);
        for (key, tid, value) in merge(&batch, shadow) {
            w.row(t.id, tid, &key, &value)?;
            rows += 1;
        }
        // (after, upto] is written for good: its pre-images may go.
        sn.shadow.pass(t.id, upto);
        if let Some((k, _, _)) = batch.last() {
            after = Some(k.clone());
        }
        sn.stage(SnapshotStage::Batch { table: t.id, rows });
        if !more {
            return Ok(Some(rows));
        }
        files.roll(w)?;
    }
}

/// The rows at the point of one key range: the tree's, replaced by the
/// shadow's pre-images where it has one, in key order.
fn merge(tree: &[TreeRow], shadow: Vec<(Vec<u8>, PreImage)>) -> Vec<(Vec<u8>, Tid, Vec<u8>)> {
    let mut out = Vec::with_capacity(tree.len() + shadow.len());
    let mut tree = tree.iter().peekable();
    let mut shadow = shadow.into_iter().peekable();
    loop {
        let order = match (tree.peek(), shadow.peek()) {
            (None, None) => return out,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((tk, _, _)), Some((sk, _))) => tk.cmp(sk),
        };
        if order == std::cmp::Ordering::Equal {
            // The shadow's image wins over the tree's.
            tree.next();
        }
        let take_tree = order == std::cmp::Ordering::Less;
        if take_tree {
            let (k, tid, v) = tree.next().expect("peeked");
            // A call's placeholder: created after the point.
            if !tid.is_placeholder() {
                out.push((k.clone(), *tid, v.clone()));
            }
        } else if let (k, Some((tid, v))) = shadow.next().expect("peeked") {
            out.push((k, tid, v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(n: u64) -> Tid {
        Tid::new(n)
    }

    #[test]
    fn merge_prefers_pre_images_and_skips_rows_absent_at_the_point() {
        let tree = vec![
            (b"a".to_vec(), tid(1), b"a1".to_vec()),
            (b"b".to_vec(), tid(5), b"b-new".to_vec()),
            (b"c".to_vec(), tid(6), b"c-created".to_vec()),
        ];
        let shadow = vec![
            (b"b".to_vec(), Some((tid(2), b"b-old".to_vec()))),
            (b"bb".to_vec(), Some((tid(3), b"deleted".to_vec()))),
            (b"c".to_vec(), None),
        ];
        let got: Vec<_> = merge(&tree, shadow)
            .into_iter()
            .map(|(k, t, v)| (k, t.get(), v))
            .collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), 1, b"a1".to_vec()),
                (b"b".to_vec(), 2, b"b-old".to_vec()),
                (b"bb".to_vec(), 3, b"deleted".to_vec()),
            ]
        );
    }
}
