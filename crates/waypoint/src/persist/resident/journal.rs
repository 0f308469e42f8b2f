//! The clean close's journal of a memory-resident scheme: every dirty
//! page, written and synced to `<scheme dir>/close.journal` before the
//! first of them is written into the data file, so a crash inside the
//! close's page writes rolls forward to the closed state instead of
//! leaving the data file a mix of the last clean close's pages (the base
//! the logs replay onto) and this one's. The journal is written under a
//! temporary name and renamed once whole and synced, so a file by the
//! journal's name is always whole (`command` relies on that alone;
//! `silor` also records a closing flag in its pepoch file).
//!
//! ```text
//! per page: [page id u64][sealed page image: page size]
//! trailer:  [magic "WPSJEND1": 8][pages u64][CRC32C of the page ids: u32][zero: 4]
//! ```
//!
//! Invariant: the journal's name appears only once it is whole and
//! synced; a journal is applied only whole (trailer, count and every
//! page's own checksum), and (under `silor`) only with the closing flag.

use crate::buffer::{page, BufferPool};
use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage, StorageFile};
use std::path::{Path, PathBuf};

pub const JOURNAL_FILE: &str = "close.journal";
/// The journal while it is written.
pub const JOURNAL_TEMP_FILE: &str = "close.journal.new";
const MAGIC: &[u8; 8] = b"WPSJEND1";
const TRAILER: usize = 24;
/// Pages buffered between writes.
const CHUNK_PAGES: usize = 256;

pub fn path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_FILE)
}

pub fn temp_path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_TEMP_FILE)
}

/// Write every dirty page of `pool` to the journal in `dir`, sync it and
/// give it its name (synced in the directory). Returns the pages written.
pub fn write(storage: &dyn Storage, dir: &Path, pool: &BufferPool) -> Result<u64> {
    let temp = temp_path(dir);
    for stale in [&temp, &path(dir)] {
        if storage.exists(stale) {
            storage.remove(stale)?;
        }
    }
    let file = storage.open(&temp, OpenMode::CreateNew)?;
    let page_size = pool.page_size();
    let mut buf = Vec::with_capacity(CHUNK_PAGES * (8 + page_size));
    let mut offset = 0u64;
    let mut pages = 0u64;
    let mut ids = 0u32;
    let flush = |buf: &mut Vec<u8>, offset: &mut u64| -> Result<()> {
        file.write_at(buf, *offset)?;
        *offset += buf.len() as u64;
        buf.clear();
        Ok(())
    };
    pool.for_each_dirty_page(&mut |pid, image| {
        buf.extend_from_slice(&pid.to_le_bytes());
        buf.extend_from_slice(image);
        ids = crc32c::crc32c_append(ids, &pid.to_le_bytes());
        pages += 1;
        if buf.len() >= CHUNK_PAGES * (8 + page_size) {
            flush(&mut buf, &mut offset)?;
        }
        Ok(())
    })?;
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&pages.to_le_bytes());
    buf.extend_from_slice(&ids.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    flush(&mut buf, &mut offset)?;
    file.sync_data()?;
    drop(file);
    storage.rename(&temp, &path(dir))?;
    storage.sync_dir(dir)?;
    Ok(pages)
}

/// The journal's pages, if it is whole; an error naming what is wrong
/// otherwise (it is read only when the closing flag says it was synced).
pub fn read(storage: &dyn Storage, dir: &Path, page_size: usize) -> Result<Vec<(u64, Vec<u8>)>> {
    let path = path(dir);
    let bad = |detail: String| Error::Corruption {
        path: path.clone(),
        offset: 0,
        detail,
    };
    if !storage.exists(&path) {
        return Err(Error::MissingFile {
            path: path.clone(),
            detail: "the pepoch file says a clean close had journaled its pages".into(),
        });
    }
    let file = storage.open(&path, OpenMode::ReadOnly)?;
    let mut bytes = vec![0u8; file.len()? as usize];
    file.read_at(&mut bytes, 0)?;
    let record = 8 + page_size;
    let Some(body_len) = bytes.len().checked_sub(TRAILER) else {
        return Err(bad("shorter than its trailer".into()));
    };
    let trailer = &bytes[body_len..];
    let count = u64::from_le_bytes(trailer[8..16].try_into().expect("8 bytes"));
    if &trailer[0..8] != MAGIC || body_len % record != 0 || (body_len / record) as u64 != count {
        return Err(bad("the trailer does not match the pages".into()));
    }
    let mut ids = 0u32;
    let mut pages = Vec::with_capacity(count as usize);
    for chunk in bytes[..body_len].chunks_exact(record) {
        let pid = u64::from_le_bytes(chunk[0..8].try_into().expect("8 bytes"));
        let image = &chunk[8..];
        page::verify(image, pid).map_err(|e| bad(format!("page {pid}: {e}")))?;
        ids = crc32c::crc32c_append(ids, &pid.to_le_bytes());
        pages.push((pid, image.to_vec()));
    }
    if ids != u32::from_le_bytes(trailer[16..20].try_into().expect("4 bytes")) {
        return Err(bad("page ids fail their checksum".into()));
    }
    Ok(pages)
}

/// Write the journal's pages into the data file and sync it.
pub fn apply(data: &dyn StorageFile, pages: &[(u64, Vec<u8>)], page_size: usize) -> Result<()> {
    for (pid, image) in pages {
        let mut aligned = crate::io::AlignedBuf::zeroed(page_size);
        aligned.as_mut_slice().copy_from_slice(image);
        data.write_at(aligned.as_slice(), pid * page_size as u64)?;
    }
    data.sync_data()
}
