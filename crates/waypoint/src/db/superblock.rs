//! Page 0 of the data file: what a reopen needs before it can read any
//! tree (docs/FORMAT.md).
//!
//! ```text
//! body offset (after the 32-byte page header, kind Superblock, page id 0)
//!  32  8  magic "WAYPOINT"
//!  40  4  database format version (DB_FORMAT_VERSION)
//!  44  4  page size in bytes
//!  48  8  next page id (high-water mark of allocated pages)
//!  56  8  catalog root page id
//!  64  8  first page of the free-page list chain (0: none)
//!  72  1  1 if the database was closed cleanly (a scheme without a log
//!         leaves it until just before its first page write)
//!  73  1  1 if an open with a log marked it unclean: until a clean close,
//!         the log (`wal/`) and the checkpoint metadata (version 2, with
//!         each partition's synced position) exist and are needed (0 from
//!         builds before checkpoint metadata 2, whose crashes may lack both)
//!  74  1  the persistence scheme that last opened or closed it
//!         (`SchemeKind`'s tag: 1 none, 2 per-worker, 3 aries; 0 from builds before
//!         the tag, which ran one of those two)
//!  80  8  the epoch at the last clean close (TIDs restart above it)
//!  88  8  log floor: every log record with a GSN at or below it is
//!         reflected in the data file (written at clean close, before the
//!         log is deleted); recovery ignores such records
//! ```
//!
//! Free-list page (kind FreeList): body `[next u64][count u32][ids u64...]`.
//! The chain is written at clean close into pages that are themselves free,
//! and read back (then released) at open.

use crate::buffer::page::{self, PageId, PageKind, PAGE_HEADER_SIZE};
use crate::error::{Error, Result};
use crate::ids::Gsn;
use crate::io::{AlignedBuf, StorageFile};
use crate::persist::SchemeKind;

pub const MAGIC: &[u8; 8] = b"WAYPOINT";
pub const DB_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub page_size: u32,
    pub next_page_id: PageId,
    pub catalog_root: PageId,
    pub free_list_head: PageId,
    pub clean: bool,
    /// Written with `clean = false` by an open with a log: the log
    /// directory and the checkpoint metadata must exist until a clean
    /// close (see the module header).
    pub log_required: bool,
    /// The scheme that last opened or closed the database (None: written
    /// before the tag existed).
    pub scheme: Option<SchemeKind>,
    pub epoch: u64,
    pub log_floor: Gsn,
}

fn corruption(file: &dyn StorageFile, offset: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: file.path().to_path_buf(),
        offset,
        detail: detail.into(),
    }
}

impl Superblock {
    /// Read and check page 0. The page size is read from the header before
    /// the checksum can be checked, since it determines what to checksum.
    pub fn read(file: &dyn StorageFile) -> Result<Superblock> {
        let len = file.len()?;
        // One aligned block, so an `O_DIRECT` data file can be read too; a
        // database file is at least one page, and pages are at least that.
        const _: () = assert!(page::MIN_PAGE_SIZE >= crate::io::IO_ALIGN);
        if len < crate::io::IO_ALIGN as u64 {
            return Err(Error::NotADatabase {
                path: file.path().to_path_buf(),
            });
        }
        let mut block = AlignedBuf::zeroed(crate::io::IO_ALIGN);
        file.read_at(block.as_mut_slice(), 0)?;
        let head = &block.as_slice()[..PAGE_HEADER_SIZE + 16];
        if &head[32..40] != MAGIC {
            return Err(Error::NotADatabase {
                path: file.path().to_path_buf(),
            });
        }
        let version = u32::from_le_bytes(head[40..44].try_into().expect("4 bytes"));
        if version != DB_FORMAT_VERSION {
            return Err(Error::UnsupportedFormatVersion {
                path: file.path().to_path_buf(),
                found: version,
                supported: DB_FORMAT_VERSION,
            });
        }
        let page_size = u32::from_le_bytes(head[44..48].try_into().expect("4 bytes"));
        if !page::is_valid_page_size(page_size as usize) || len < page_size as u64 {
            return Err(corruption(
                file,
                44,
                format!("superblock names page size {page_size}"),
            ));
        }
        let mut buf = AlignedBuf::zeroed(page_size as usize);
        file.read_at(buf.as_mut_slice(), 0)?;
        let data = buf.as_slice();
        page::verify(data, 0).map_err(|e| corruption(file, 0, format!("superblock: {e}")))?;
        let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
        Ok(Superblock {
            page_size,
            next_page_id: u64_at(48),
            catalog_root: u64_at(56),
            free_list_head: u64_at(64),
            clean: data[72] == 1,
            log_required: data[73] == 1,
            scheme: match data[74] {
                0 => None,
                tag => Some(SchemeKind::from_tag(tag).ok_or_else(|| {
                    corruption(
                        file,
                        74,
                        format!("superblock names unknown scheme tag {tag}"),
                    )
                })?),
            },
            epoch: u64_at(80).min(crate::ids::Tid::MAX_EPOCH),
            log_floor: Gsn::new(u64_at(88)),
        })
    }

    /// Write page 0 and `fdatasync`.
    /// The superblock an open writes before the data file changes: not
    /// clean, the free list only in memory (an unclean stop leaks those
    /// pages instead of handing them out twice), `scheme` named. The
    /// caller sets `log_required`.
    pub fn unclean_mark(&self, scheme: SchemeKind) -> Superblock {
        Superblock {
            free_list_head: 0,
            clean: false,
            log_required: false,
            scheme: Some(scheme),
            ..self.clone()
        }
    }

    pub fn write(&self, file: &dyn StorageFile) -> Result<()> {
        let mut buf = AlignedBuf::zeroed(self.page_size as usize);
        let data = buf.as_mut_slice();
        page::init_page(data, 0, PageKind::Superblock);
        data[32..40].copy_from_slice(MAGIC);
        data[40..44].copy_from_slice(&DB_FORMAT_VERSION.to_le_bytes());
        data[44..48].copy_from_slice(&self.page_size.to_le_bytes());
        data[48..56].copy_from_slice(&self.next_page_id.to_le_bytes());
        data[56..64].copy_from_slice(&self.catalog_root.to_le_bytes());
        data[64..72].copy_from_slice(&self.free_list_head.to_le_bytes());
        data[72] = self.clean as u8;
        data[73] = self.log_required as u8;
        data[74] = self.scheme.map_or(0, SchemeKind::tag);
        data[80..88].copy_from_slice(&self.epoch.to_le_bytes());
        data[88..96].copy_from_slice(&self.log_floor.get().to_le_bytes());
        page::seal(data);
        file.write_at(data, 0)?;
        file.sync_data()
    }
}

fn ids_per_page(page_size: usize) -> usize {
    (page_size - PAGE_HEADER_SIZE - 12) / 8
}

/// Write `free` as a chain into some of its own pages; returns the head
/// (0 for an empty list). The caller syncs.
pub fn write_free_list(
    file: &dyn StorageFile,
    page_size: usize,
    free: &[(PageId, Gsn)],
) -> Result<PageId> {
    if free.is_empty() {
        return Ok(0);
    }
    let per_page = ids_per_page(page_size);
    // k chain pages hold the remaining free.len() - k ids.
    let chain_pages = free.len().div_ceil(per_page + 1);
    let (chain, listed) = free.split_at(chain_pages);
    let mut buf = AlignedBuf::zeroed(page_size);
    for (i, &pid) in chain.iter().enumerate() {
        let (pid, gsn) = pid;
        let ids = listed.chunks(per_page).nth(i).unwrap_or(&[]);
        let next = chain.get(i + 1).map_or(0, |&(p, _)| p);
        let data = buf.as_mut_slice();
        page::init_page(data, pid, PageKind::FreeList);
        // The page's GSN stays that of its last logged change (its free):
        // if the close fails before the superblock retires the log, redo
        // must see this copy as the page's state at that GSN, not as a
        // page at GSN 0 that the page's logged history could be replayed
        // onto (found by `waypoint simulate`, seed 12712).
        page::set_page_gsn(data, gsn);
        let body = PAGE_HEADER_SIZE;
        data[body..body + 8].copy_from_slice(&next.to_le_bytes());
        data[body + 8..body + 12].copy_from_slice(&(ids.len() as u32).to_le_bytes());
        for (j, (id, _)) in ids.iter().enumerate() {
            let at = body + 12 + j * 8;
            data[at..at + 8].copy_from_slice(&id.to_le_bytes());
        }
        page::seal(data);
        file.write_at(data, pid * page_size as u64)?;
    }
    Ok(chain[0].0)
}

/// Read the chain starting at `head`: every listed id plus the chain pages.
pub fn read_free_list(
    file: &dyn StorageFile,
    page_size: usize,
    head: PageId,
    next_page_id: PageId,
) -> Result<Vec<PageId>> {
    let mut free = Vec::new();
    let mut pid = head;
    let mut buf = AlignedBuf::zeroed(page_size);
    while pid != 0 {
        let offset = pid * page_size as u64;
        if pid >= next_page_id || free.len() as u64 > next_page_id {
            return Err(corruption(
                file,
                offset,
                "free-list chain leaves the file or loops",
            ));
        }
        let data = buf.as_mut_slice();
        file.read_at(data, offset)?;
        page::verify(data, pid)
            .map_err(|e| corruption(file, offset, format!("free-list page: {e}")))?;
        if page::page_kind(data) != Some(PageKind::FreeList) {
            return Err(corruption(
                file,
                offset,
                "free-list chain reaches a page that is not a free-list page",
            ));
        }
        let body = PAGE_HEADER_SIZE;
        let next = u64::from_le_bytes(data[body..body + 8].try_into().expect("8 bytes"));
        let count =
            u32::from_le_bytes(data[body + 8..body + 12].try_into().expect("4 bytes")) as usize;
        if count > ids_per_page(page_size) {
            return Err(corruption(
                file,
                offset,
                format!("free-list page lists {count} ids"),
            ));
        }
        for j in 0..count {
            let at = body + 12 + j * 8;
            let id = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
            if id == 0 || id >= next_page_id {
                return Err(corruption(
                    file,
                    offset,
                    format!("free-list names page {id}"),
                ));
            }
            free.push(id);
        }
        free.push(pid);
        pid = next;
    }
    free.sort_unstable();
    free.dedup();
    Ok(free)
}
