//! The on-disk page header shared by every page kind (docs/FORMAT.md).
//!
//! ```text
//! offset size field
//!      0    4 crc32c of bytes 4..page_size (computed when the page is written)
//!      4    2 page format version (PAGE_FORMAT_VERSION)
//!      6    1 page kind (PageKind)
//!      7    1 reserved, zero
//!      8    8 page id
//!     16    8 page GSN: GSN of the last log record applied to the page
//!     24    8 reserved, zero
//!     32    . body, owned by the page kind (btree node, superblock, ...)
//! ```
//!
//! Invariant (checked after every read, DESIGN.md invariant 6): a page read
//! from disk has a matching checksum, the expected page id and a known format
//! version; otherwise the read is a corruption error naming file and offset.

use crate::ids::Gsn;

pub const PAGE_FORMAT_VERSION: u16 = 1;
pub const PAGE_HEADER_SIZE: usize = 32;
pub const MIN_PAGE_SIZE: usize = 4096;
pub const MAX_PAGE_SIZE: usize = 65536;
pub const DEFAULT_PAGE_SIZE: usize = 16384;

pub type PageId = u64;

/// What a page holds; stored in byte 6 of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// Never written, or released to the free list.
    Free = 0,
    /// Page 0: the database superblock.
    Superblock = 1,
    BtreeLeaf = 2,
    BtreeInner = 3,
    /// A page of the on-disk free-page list.
    FreeList = 4,
}

impl PageKind {
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => PageKind::Free,
            1 => PageKind::Superblock,
            2 => PageKind::BtreeLeaf,
            3 => PageKind::BtreeInner,
            4 => PageKind::FreeList,
            _ => return None,
        })
    }
}

pub fn is_valid_page_size(size: usize) -> bool {
    size.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size)
}

fn read_u64(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"))
}

pub fn page_id(page: &[u8]) -> PageId {
    read_u64(page, 8)
}

pub fn set_page_id(page: &mut [u8], id: PageId) {
    page[8..16].copy_from_slice(&id.to_le_bytes());
}

pub fn page_gsn(page: &[u8]) -> Gsn {
    Gsn::new(read_u64(page, 16))
}

pub fn set_page_gsn(page: &mut [u8], gsn: Gsn) {
    page[16..24].copy_from_slice(&gsn.get().to_le_bytes());
}

pub fn page_kind(page: &[u8]) -> Option<PageKind> {
    PageKind::from_byte(page[6])
}

pub fn set_page_kind(page: &mut [u8], kind: PageKind) {
    page[6] = kind as u8;
}

/// Zero the page and write a fresh header.
pub fn init_page(page: &mut [u8], id: PageId, kind: PageKind) {
    page.fill(0);
    page[4..6].copy_from_slice(&PAGE_FORMAT_VERSION.to_le_bytes());
    set_page_kind(page, kind);
    set_page_id(page, id);
}

/// Stamp the checksum into a page copy about to be written.
pub fn seal(page: &mut [u8]) {
    let crc = crc32c::crc32c(&page[4..]);
    page[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Why a page read from disk was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageCheckError {
    /// All zero: the page was allocated but never written (e.g. the file was
    /// extended and the process died before the page reached disk).
    NeverWritten,
    Checksum {
        stored: u32,
        computed: u32,
    },
    Version(u16),
    WrongId {
        found: PageId,
    },
    Kind(u8),
}

impl std::fmt::Display for PageCheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageCheckError::NeverWritten => write!(f, "page was never written (all zero)"),
            PageCheckError::Checksum { stored, computed } => write!(
                f,
                "page checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            PageCheckError::Version(v) => write!(f, "unknown page format version {v}"),
            PageCheckError::WrongId { found } => write!(f, "page header names page {found}"),
            PageCheckError::Kind(k) => write!(f, "unknown page kind {k}"),
        }
    }
}

/// Verify a page just read from disk as page `expected`.
pub fn verify(page: &[u8], expected: PageId) -> Result<(), PageCheckError> {
    let stored = u32::from_le_bytes(page[0..4].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&page[4..]);
    if stored != computed {
        if page.iter().all(|&b| b == 0) {
            return Err(PageCheckError::NeverWritten);
        }
        return Err(PageCheckError::Checksum { stored, computed });
    }
    let version = u16::from_le_bytes(page[4..6].try_into().expect("2 bytes"));
    if version != PAGE_FORMAT_VERSION {
        return Err(PageCheckError::Version(version));
    }
    if PageKind::from_byte(page[6]).is_none() {
        return Err(PageCheckError::Kind(page[6]));
    }
    let found = page_id(page);
    if found != expected {
        return Err(PageCheckError::WrongId { found });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_page_verifies_and_any_bit_flip_is_caught() {
        let mut page = vec![0u8; MIN_PAGE_SIZE];
        init_page(&mut page, 7, PageKind::BtreeLeaf);
        set_page_gsn(&mut page, Gsn::new(42));
        page[100] = 0xab;
        seal(&mut page);
        assert_eq!(verify(&page, 7), Ok(()));
        assert_eq!(verify(&page, 8), Err(PageCheckError::WrongId { found: 7 }));
        for bit in [0usize, 31, 40, 8 * 100 + 3, 8 * MIN_PAGE_SIZE - 1] {
            let mut flipped = page.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(matches!(
                verify(&flipped, 7),
                Err(PageCheckError::Checksum { .. })
            ));
        }
    }

    #[test]
    fn zero_page_is_never_written() {
        let page = vec![0u8; MIN_PAGE_SIZE];
        assert_eq!(verify(&page, 3), Err(PageCheckError::NeverWritten));
    }
}
