//! Recovery from arbitrary bytes in a log segment: `Database::open` must
//! return `Ok` or a typed `Err`, never panic or hang.
//!
//! Once per process, a small database is built on the simulated storage
//! (`io::SimStorage`, 4 KiB pages, a 64-page buffer): a table, a few
//! hundred inserts (enough for leaf splits, so the log holds structure
//! modification groups), updates and deletes, then the process "dies"
//! (never closed, then `crash(KeepAll)`). Its files are kept as bytes.
//!
//! Each input gets a fresh simulated disk holding those files, with one log
//! segment (under `/db/wal/p*/`) damaged by the input:
//! - byte 0, bit 0: keep the 32-byte segment header valid and write the
//!   fuzz bytes after it (at byte 32 + offset), or overwrite the file from
//!   byte 0, header included (half of the inputs each);
//! - bit 1: cut the file right after the written bytes, or leave the rest;
//! - bit 2: rewrite the checksum of every record framed after the header
//!   (and of the header itself when it was overwritten), so that
//!   checksum-valid but nonsensical records reach analysis, redo and undo;
//! - bits 3..8: which segment (modulo their number);
//! - bytes 1..3: the offset (u16, modulo the segment's record bytes) at
//!   which the fuzz bytes go when the header is kept;
//! - the rest: the bytes written.
//!
//! Then the database is opened. On success the integrity check runs and the
//! table is scanned (their results may be errors, but not panics), and the
//! database is closed by drop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use waypoint::io::{CrashPolicy, OpenMode, SimStorage, Storage};
use waypoint::logstore::segment::{encode_header, header_checksum, HEADER_SIZE};
use waypoint::SchemeKind;
use waypoint::{CommitProtocol, Database, Options, PerWorkerOptions, Persistence};
use waypoint_fuzz::fix_record_checksums;

const DB: &str = "/db";
const HEADER: usize = HEADER_SIZE as usize;

fn options(sim: &SimStorage) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 64 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            commit: CommitProtocol::FlushAll,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    }
}

/// The files of the crashed database: (path, bytes), and its directories.
struct Image {
    dirs: Vec<PathBuf>,
    files: Vec<(PathBuf, Vec<u8>)>,
    /// Indices into `files` of the log segments.
    segments: Vec<usize>,
}

fn collect(sim: &SimStorage, dir: &Path, image: &mut Image) {
    image.dirs.push(dir.to_path_buf());
    for entry in sim.list_dir(dir).expect("list a simulated directory") {
        match sim.read_current(&entry) {
            Some(bytes) => image.files.push((entry, bytes)),
            None => collect(sim, &entry, image),
        }
    }
}

fn build_image() -> Image {
    let sim = SimStorage::new(1);
    let db = Database::open(DB, options(&sim)).expect("create the database");
    let t = db.create_table("t").expect("create a table");
    let mut s = db.session();
    for i in 0..300u32 {
        let mut tx = s.begin().unwrap();
        tx.insert(&t, &i.to_be_bytes(), &[i as u8; 40]).unwrap();
        tx.commit().unwrap();
    }
    for i in (0..300u32).step_by(7) {
        let mut tx = s.begin().unwrap();
        tx.update(&t, &i.to_be_bytes(), &[i as u8 ^ 0xff; 40])
            .unwrap();
        tx.commit().unwrap();
    }
    for i in (0..300u32).step_by(5) {
        let mut tx = s.begin().unwrap();
        tx.delete(&t, &i.to_be_bytes()).unwrap();
        tx.commit().unwrap();
    }
    drop((s, t));
    // "Killed": never closed or dropped. Kept reachable rather than
    // forgotten, so that a sanitizer build (`cargo +nightly fuzz run`,
    // AddressSanitizer) does not report it as a leak when the run ends.
    CRASHED.lock().unwrap().push(db);
    sim.crash(CrashPolicy::KeepAll);
    let mut image = Image {
        dirs: Vec::new(),
        files: Vec::new(),
        segments: Vec::new(),
    };
    collect(&sim, Path::new(DB), &mut image);
    image.segments = image
        .files
        .iter()
        .enumerate()
        .filter(|(_, (p, b))| p.extension().is_some_and(|e| e == "wal") && b.len() > HEADER)
        .map(|(i, _)| i)
        .collect();
    assert!(!image.segments.is_empty(), "the crashed database has a log");
    image
}

/// The database the image was taken from, as a killed process left it.
static CRASHED: Mutex<Vec<Database>> = Mutex::new(Vec::new());

fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(build_image)
}

/// A fresh simulated disk holding `files`, all durable.
fn disk(image: &Image, files: &[(PathBuf, Vec<u8>)]) -> SimStorage {
    let sim = SimStorage::new(2);
    for d in &image.dirs {
        sim.create_dir_all(d).unwrap();
    }
    for (path, bytes) in files {
        let f = sim.open(path, OpenMode::CreateNew).unwrap();
        f.write_at(bytes, 0).unwrap();
        f.sync_data().unwrap();
    }
    // KeepAll makes every write and directory entry durable, as if synced.
    sim.crash(CrashPolicy::KeepAll);
    sim
}

fn damage(segment: &mut Vec<u8>, data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let keep_header = mode & 1 != 0;
    let cut = mode & 2 != 0;
    let seal = mode & 4 != 0;
    let (at, bytes) = if keep_header {
        let (off, bytes) = match rest.split_first_chunk::<2>() {
            Some((o, b)) => (u16::from_le_bytes(*o) as usize, b),
            None => (0, rest),
        };
        let records = segment.len() - HEADER;
        (HEADER + off % (records + 1), bytes)
    } else {
        (0, rest)
    };
    let end = at + bytes.len();
    if segment.len() < end {
        segment.resize(end, 0);
    }
    segment[at..end].copy_from_slice(bytes);
    if cut {
        segment.truncate(end);
    }
    if seal {
        if !keep_header && segment.len() >= HEADER {
            // The per-worker scheme's tag and zeros, under a valid checksum.
            let ours = encode_header(SchemeKind::PerWorker, 0, waypoint::LogPos::ZERO);
            segment[28..32].copy_from_slice(&ours[28..32]);
            let crc = header_checksum(&segment[..HEADER]);
            segment[24..28].copy_from_slice(&crc.to_le_bytes());
        }
        if segment.len() > HEADER {
            let start = u64::from_le_bytes(segment[16..24].try_into().unwrap());
            fix_record_checksums(&mut segment[HEADER..], start);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let image = image();
    let Some(&mode) = data.first() else {
        return;
    };
    let which = image.segments[(mode >> 3) as usize % image.segments.len()];
    let mut files = image.files.clone();
    damage(&mut files[which].1, data);
    let sim = disk(image, &files);
    match Database::open(DB, options(&sim)) {
        Ok(db) => {
            let _ = db.check_integrity();
            if let Ok(t) = db.table("t") {
                let mut s = db.session();
                if let Ok(mut tx) = s.begin() {
                    let _ = tx.scan(&t, .., 10_000);
                };
            }
        }
        Err(e) => {
            // Typed: every error names what failed.
            let _ = e.to_string();
        }
    }
});
