//! The pepoch file (seed 002 §4.1): the persistent epoch, the newest epoch
//! every logger has made durable, below which every commit is recovered.
//! It also names the log generation being written and the bound of each
//! older generation still on disk (`silor/mod.rs` says why generations).
//!
//! ```text
//! [magic "WPSILORP": 8][version u32][closing u8][zero: 3]
//! [generation u64][pepoch u64][sealed count u32]
//! ([generation u64][bound u64]) per sealed generation
//! version 2 only: [checkpoint id u64 (0: none)][el u64][eh u64]
//! [CRC32C of everything before: u32]
//! ```
//!
//! Version 2 adds the installed checkpoint (`silor::checkpoint`): its id
//! and epoch range [el, eh]. Writing this file is what installs a
//! checkpoint. Version 1 files (no checkpoint) are still read.
//!
//! Invariant: a crash leaves the old or the new file, never a torn one:
//! each version is written whole to `pepoch.new`, synced, renamed over
//! `pepoch` and the directory synced. A file that fails its checksum was
//! damaged after it was durable: corruption.

use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage};
use std::path::Path;

pub const PEPOCH_FILE: &str = "pepoch";
const TEMP_FILE: &str = "pepoch.new";
const MAGIC: &[u8; 8] = b"WPSILORP";
const VERSION: u32 = 2;
/// The version before checkpoints, still read.
const VERSION_1: u32 = 1;

/// What the pepoch file records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PepochState {
    /// The generation whose log files the loggers write now.
    pub generation: u64,
    /// Every commit of `generation` in an epoch at or below it is durable
    /// in its logs, and acknowledged commits are all among them.
    pub pepoch: u64,
    /// Older generations still on disk, with the pepoch each ended at.
    pub sealed: Vec<(u64, u64)>,
    /// A clean close began writing pages into the data file: the data
    /// file is no longer the base the logs replay onto.
    pub closing: bool,
    /// The installed checkpoint, the base the logs replay onto instead of
    /// the data file.
    pub checkpoint: Option<Installed>,
}

/// An installed checkpoint: its directory's id and its epoch range. Every
/// commit of an epoch below `el` is in it (or overwritten in it by a
/// later one); pepoch had reached `eh` when it was installed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Installed {
    pub id: u64,
    pub el: u64,
    pub eh: u64,
}

impl PepochState {
    /// The recovery bound of `generation`'s logs: entries of later epochs
    /// were never acknowledged. `None`: not a generation this file knows
    /// (one started after the file was last written holds nothing
    /// acknowledged).
    pub fn bound(&self, generation: u64) -> Option<u64> {
        if generation == self.generation {
            return Some(self.pepoch);
        }
        self.sealed
            .iter()
            .find(|(g, _)| *g == generation)
            .map(|(_, b)| *b)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + 16 * self.sealed.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&[self.closing as u8, 0, 0, 0]);
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.pepoch.to_le_bytes());
        out.extend_from_slice(&(self.sealed.len() as u32).to_le_bytes());
        for (g, b) in &self.sealed {
            out.extend_from_slice(&g.to_le_bytes());
            out.extend_from_slice(&b.to_le_bytes());
        }
        let c = self.checkpoint.unwrap_or_default();
        assert!(
            self.checkpoint.is_none() || c.id != 0,
            "checkpoint ids start at 1"
        );
        for v in [c.id, c.el, c.eh] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decode a whole file; the error says what is wrong.
    pub fn decode(bytes: &[u8]) -> std::result::Result<PepochState, String> {
        let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
            return Err("shorter than a checksum".into());
        };
        if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
            return Err("checksum mismatch".into());
        }
        if body.len() < 36 || &body[0..8] != MAGIC {
            return Err("not a pepoch file".into());
        }
        let u64_at = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().expect("8 bytes"));
        let version = u32::from_le_bytes(body[8..12].try_into().expect("4 bytes"));
        if version != VERSION && version != VERSION_1 {
            return Err(format!(
                "format version {version}, this build reads {VERSION_1} and {VERSION}"
            ));
        }
        let tail = if version == VERSION { 24 } else { 0 };
        let closing = match body[12] {
            0 => false,
            1 => true,
            _ => return Err("bad closing flag".into()),
        };
        let count = u32::from_le_bytes(body[32..36].try_into().expect("4 bytes")) as usize;
        if body.len() != 36 + 16 * count + tail {
            return Err("length does not match the sealed generations".into());
        }
        let sealed = (0..count)
            .map(|i| (u64_at(36 + 16 * i), u64_at(44 + 16 * i)))
            .collect();
        let at = 36 + 16 * count;
        let checkpoint = (tail > 0 && u64_at(at) != 0).then(|| Installed {
            id: u64_at(at),
            el: u64_at(at + 8),
            eh: u64_at(at + 16),
        });
        if checkpoint.is_some_and(|c| c.el > c.eh) {
            return Err("checkpoint epoch range is empty".into());
        }
        Ok(PepochState {
            generation: u64_at(16),
            pepoch: u64_at(24),
            sealed,
            closing,
            checkpoint,
        })
    }
}

/// The pepoch file in `dir`, if there is one.
pub fn read(storage: &dyn Storage, dir: &Path) -> Result<Option<PepochState>> {
    let path = dir.join(PEPOCH_FILE);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let file = storage.open(&path, OpenMode::ReadOnly)?;
    let mut bytes = vec![0u8; file.len()? as usize];
    file.read_at(&mut bytes, 0)?;
    PepochState::decode(&bytes)
        .map(Some)
        .map_err(|detail| Error::Corruption {
            path,
            offset: 0,
            detail: format!("pepoch file: {detail}"),
        })
}

/// Replace the pepoch file in `dir` with `state`, durably (see the module
/// documentation).
pub fn write(storage: &dyn Storage, dir: &Path, state: &PepochState) -> Result<()> {
    let temp = dir.join(TEMP_FILE);
    if storage.exists(&temp) {
        storage.remove(&temp)?;
    }
    let file = storage.open(&temp, OpenMode::CreateNew)?;
    file.write_at(&state.encode(), 0)?;
    file.sync_data()?;
    drop(file);
    storage.rename(&temp, &dir.join(PEPOCH_FILE))?;
    storage.sync_dir(dir)
}
