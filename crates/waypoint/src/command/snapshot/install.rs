//! Installing a snapshot and pruning what it replaces (seed 001 §II-C1,
//! §III-B): once the snapshot's files are whole and synced, and the
//! command log is durable up to the snapshot's point (so the snapshot
//! holds no call a crash could take back), one atomic write of the
//! snapshot meta file (`command/snapshot.meta`: temporary name, sync,
//! rename, directory sync) names it; only then are deleted the log
//! segments wholly before the point, the older generations, and every
//! other snapshot.
//!
//! Why segments are pruned below the point's sequence number and not one
//! above: a segment's mark is the largest sequence number appended to it,
//! and a catalog change logged after call `s` carries mark `s`; so only a
//! segment whose mark is below `s` is sure to hold nothing at or after
//! the point's position.
//!
//! ```text
//! snapshot.meta: [magic "WPCMDSNP": 8][version u32 = 1][point: 48]
//!                [CRC32C of bytes 0..60: u32]
//! point: id, generation, position, sequence, next id, epoch (u64 LE each)
//! ```
//!
//! Invariant: nothing a recovery from the installed snapshot needs is
//! deleted, and nothing is deleted before the meta file naming the newer
//! snapshot is durable.

use super::write::{Point, Written};
use super::{Snapshotter, META_FILE, META_TEMP};
use crate::error::{Error, Result};
use crate::ids::LogPos;
use crate::io::{OpenMode, Storage};
use crate::persist::resident::{dir_bytes, generations, remove_numbered_but, remove_synced, write_renamed};
use std::path::Path;
use std::sync::atomic::Ordering;

const MAGIC: &[u8; 8] = b"WPCMDSNP";
const VERSION: u32 = 1;
const META_LEN: usize = 8 + 4 + Point::ENCODED + 4;

fn encode(point: &Point) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&point.encode());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> std::result::Result<Point, String> {
    if bytes.len() != META_LEN {
        return Err(format!("{} bytes, not {META_LEN}", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("not a snapshot meta file".into());
    }
    let crc = u32::from_le_bytes(bytes[META_LEN - 4..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..META_LEN - 4]) != crc {
        return Err("checksum mismatch".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(format!("version {version}, this build reads {VERSION}"));
    }
    Point::decode(&bytes[12..12 + Point::ENCODED]).ok_or_else(|| "bad point".into())
}

/// The installed snapshot's point, if the meta file exists.
pub(crate) fn read_meta(storage: &dyn Storage, command: &Path) -> Result<Option<Point>> {
    let path = command.join(META_FILE);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let file = storage.open(&path, OpenMode::ReadOnly)?;
    let mut bytes = vec![0u8; file.len()? as usize];
    file.read_at(&mut bytes, 0)?;
    decode(&bytes).map(Some).map_err(|detail| Error::Corruption {
        path,
        offset: 0,
        detail: format!("snapshot meta file: {detail}"),
    })
}

/// Install `written`: the log durable to its point, then the meta file.
pub(super) fn install(sn: &Snapshotter, written: &Written) -> Result<()> {
    sn.log.stream.sync_to(LogPos::new(written.point.position))?;
    write_renamed(
        sn.storage.as_ref(),
        &sn.dir,
        META_FILE,
        META_TEMP,
        &encode(&written.point),
    )?;
    let mut c = sn.counters.lock();
    c.installed += 1;
    c.bytes += written.bytes;
    c.last_bytes = written.bytes;
    c.last_rows = written.rows;
    c.last_sequence = written.point.sequence;
    drop(c);
    tracing::debug!(
        id = written.point.id,
        sequence = written.point.sequence,
        bytes = written.bytes,
        "command snapshot installed"
    );
    Ok(())
}

/// After `point`'s snapshot is installed: delete what it replaces.
pub(super) fn prune(sn: &Snapshotter, point: &Point) -> Result<()> {
    let storage = sn.storage.as_ref();
    let mut deleted = sn.log.stream.prune_below(point.sequence)?;
    for (g, path) in generations(storage, &sn.dir)? {
        if g < point.generation {
            deleted += dir_bytes(storage, &path);
            remove_synced(storage, &path)?;
        }
    }
    sn.sealed_log_bytes.store(0, Ordering::Relaxed);
    remove_other_snapshots(storage, &sn.dir, Some(point.id))?;
    sn.counters.lock().log_bytes_deleted += deleted;
    Ok(())
}

/// Remove every snapshot directory but `keep`'s.
pub(crate) fn remove_other_snapshots(
    storage: &dyn Storage,
    command: &Path,
    keep: Option<u64>,
) -> Result<()> {
    remove_numbered_but(storage, &command.join(super::SNAPSHOTS_DIR), 's', keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_file_reads_back_and_refuses_damage() {
        let p = Point {
            id: 3,
            generation: 2,
            position: 4096,
            sequence: 77,
            next_id: 9,
            epoch: 12,
        };
        let bytes = encode(&p);
        assert_eq!(decode(&bytes), Ok(p));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(decode(&bad).is_err(), "flip at {i} accepted");
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
