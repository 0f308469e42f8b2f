//! A page image record's body: the page after a structure modification
//! with its free gap left out (seed 000 §3.8's log compression: the image
//! costs about the page's used bytes).
//!
//! Invariant: an image gives back exactly the body it was made from, for a
//! page of the size it was made for and no other.

use super::le_u64;
use crate::buffer::page::{MAX_PAGE_SIZE, PAGE_HEADER_SIZE};

/// Longest page-image body: the body of the largest page.
pub const MAX_IMAGE_BODY: usize = MAX_PAGE_SIZE - PAGE_HEADER_SIZE;

/// A page body (page bytes 32..page_size) with a long zero run (the free
/// gap, [`PageImage::from_body`]) left out: the body is `head`, then
/// `zero_run` zero bytes, then `tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageImage<'a> {
    pub head: &'a [u8],
    pub zero_run: u32,
    pub tail: &'a [u8],
}

impl<'a> PageImage<'a> {
    /// Split `body` around a long run of zero bytes: the longest run of
    /// zero 8-byte words (the first on a tie), widened by the zero bytes on
    /// either side. On a slotted page that run is the free gap between slot
    /// array and heap, so the image costs roughly the page's used bytes.
    ///
    /// Why words: every split logs a page image, and a byte-by-byte search
    /// for the longest zero run cost 64 k instructions per 16 KiB page
    /// (its data holds many short zero runs). The run found is at most 14
    /// bytes shorter than the longest: any run of 15 or more zero bytes
    /// holds an aligned zero word.
    ///
    /// # Panics
    /// If `body` is longer than [`MAX_IMAGE_BODY`].
    pub fn from_body(body: &'a [u8]) -> Self {
        assert!(body.len() <= MAX_IMAGE_BODY, "page body too large");
        let word = |w: usize| le_u64(&body[8 * w..]);
        let words = body.len() / 8;
        let (mut best, mut best_len) = (0, 0);
        let mut w = 0;
        while w < words {
            if word(w) != 0 {
                w += 1;
                continue;
            }
            let first = w;
            while w < words && word(w) == 0 {
                w += 1;
            }
            if w - first > best_len {
                (best, best_len) = (first, w - first);
            }
        }
        if best_len == 0 {
            return PageImage {
                head: body,
                zero_run: 0,
                tail: &[],
            };
        }
        let (mut start, mut end) = (8 * best, 8 * (best + best_len));
        while start > 0 && body[start - 1] == 0 {
            start -= 1;
        }
        while end < body.len() && body[end] == 0 {
            end += 1;
        }
        PageImage {
            head: &body[..start],
            zero_run: (end - start) as u32,
            tail: &body[end..],
        }
    }

    /// Length of the whole body: page size minus the 32-byte page header.
    pub fn body_len(&self) -> usize {
        self.head.len() + self.zero_run as usize + self.tail.len()
    }

    /// The full body for a page of `page_size` bytes; `None` when the image
    /// has another length (it belongs to a database with another page size).
    pub fn image_body(&self, page_size: usize) -> Option<Vec<u8>> {
        if page_size.checked_sub(PAGE_HEADER_SIZE) != Some(self.body_len()) {
            return None;
        }
        let mut body = vec![0; self.body_len()];
        self.write_body(&mut body);
        Some(body)
    }

    /// Write the body into `page[32..]` (the page header is left alone);
    /// `false`, with the page untouched, when the sizes disagree. Redo uses
    /// this to rebuild a page (in a copy it checks before the frame takes
    /// it).
    pub fn write_to_page(&self, page: &mut [u8]) -> bool {
        if page.len().checked_sub(PAGE_HEADER_SIZE) != Some(self.body_len()) {
            return false;
        }
        self.write_body(&mut page[PAGE_HEADER_SIZE..]);
        true
    }

    fn write_body(&self, body: &mut [u8]) {
        let (h, z) = (self.head.len(), self.zero_run as usize);
        body[..h].copy_from_slice(self.head);
        body[h..h + z].fill(0);
        body[h + z..].copy_from_slice(self.tail);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::wal::record::{decode, encode, encoded_len, Record, RecordBody, RecordHeader};
    use proptest::prelude::*;

    /// A page body with some zero stretches, like a slotted page.
    pub(in crate::wal::record) fn page_body() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(any::<u8>(), 0..200),
            0usize..600,
            prop::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(|(mut head, gap, tail)| {
                head.resize(head.len() + gap, 0);
                head.extend(tail);
                head
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn page_image_round_trips_and_elides_the_longest_zero_run(body in page_body()) {
        let img = PageImage::from_body(&body);
        prop_assert_eq!(img.body_len(), body.len());
        let longest = body
            .split(|&b| b != 0)
            .map(|run| run.len())
            .max()
            .unwrap_or(0);
        // Within 14 bytes of the longest run, and a whole run: zeros
        // neither before nor after it.
        prop_assert!(img.zero_run as usize + 14 >= longest, "{} of {}", img.zero_run, longest);
        if img.zero_run > 0 {
            prop_assert!(img.head.last().is_none_or(|&b| b != 0));
            prop_assert!(img.tail.first().is_none_or(|&b| b != 0));
        }
        let page_size = body.len() + PAGE_HEADER_SIZE;
        prop_assert_eq!(img.image_body(page_size), Some(body.clone()));
        prop_assert_eq!(img.image_body(page_size + 1), None);
        let mut page = vec![0xee; page_size];
        prop_assert!(img.write_to_page(&mut page));
        prop_assert_eq!(&page[PAGE_HEADER_SIZE..], &body[..]);
        prop_assert!(page[..PAGE_HEADER_SIZE].iter().all(|&b| b == 0xee));
        // Through the log and back.
        let mut out = Vec::new();
        let header = RecordHeader { page_kind: 2, tree: 1, page: 3, ..Default::default() };
        encode(&header, &RecordBody::Image(img), &mut out);
        prop_assert_eq!(out.len(), encoded_len(&header, &RecordBody::Image(img)));
        prop_assert!(out.len() < 48 + body.len() - img.zero_run as usize, "the zero run is left out");
        let Record { body: RecordBody::Image(back), .. } = decode(&out).unwrap() else {
            panic!("not an image");
        };
        prop_assert_eq!(back.image_body(page_size), Some(body));
    }
    }
}
