//! A read-only look at a database directory, for `waypoint inspect`: the
//! superblock, the data file's size, the checkpoint metadata and every log
//! segment with its record count and GSN range, and the log's records and
//! bytes by record kind (what the log volume is made of).
//!
//! Nothing here recovers, repairs, truncates or writes: files are opened
//! with [`OpenMode::ReadOnly`], and the log is read with the decoders
//! recovery uses ([`segment::decode_header`], [`record::scan_segment`]), so
//! what is reported is what the next open would find, before it changes
//! anything. A segment that recovery would refuse or truncate is reported
//! with its state rather than failing the whole look; only a directory
//! without a readable superblock is an error.

use crate::buffer::page::PAGE_FORMAT_VERSION;
use crate::checkpoint::meta;
use crate::db::{Superblock, DATA_FILE, DB_FORMAT_VERSION, DOUBLE_WRITE_FILE, WAL_DIR};
use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use crate::io::{OpenMode, RealStorage, Storage};
use crate::logstore::scan::ScanEnd;
use crate::logstore::segment::parse_segment_name;
use crate::logstore::segment::{self, LOG_FORMAT_VERSION};
use crate::persist::SchemeKind;
use crate::wal::partition::partition_dir;
use crate::wal::record::{self, RecordKind};
use crate::wal::recovery::partition_ids;
use std::path::{Path, PathBuf};

/// What a database directory holds.
#[derive(Debug, Clone)]
pub struct DatabaseInfo {
    pub dir: PathBuf,
    /// Format versions this build reads and writes (a file of another
    /// version would have been refused or is reported per segment).
    pub db_format_version: u32,
    pub page_format_version: u16,
    pub log_format_version: u32,
    pub checkpoint_format_version: u32,
    pub superblock: Superblock,
    pub data_file_bytes: u64,
    /// Whole pages in the data file (`data_file_bytes / page_size`).
    pub data_file_pages: u64,
    /// Size of the double-write file, if present.
    pub double_write_bytes: Option<u64>,
    /// `checkpoint.waypoint`.
    pub checkpoint: CheckpointState,
    /// The floor the next recovery would use: the larger of the
    /// superblock's and the checkpoint metadata's.
    pub log_floor: Gsn,
    pub partitions: Vec<PartitionInfo>,
    /// The `silor` scheme's pepoch file and checkpoints (empty when it
    /// left none).
    pub silor: crate::silor::checkpoint::SilorFiles,
    /// The `command` scheme's installed snapshot and snapshot files
    /// (empty when it left none).
    pub command: crate::command::snapshot::CommandFiles,
}

impl DatabaseInfo {
    /// Bytes of all segment files.
    pub fn log_bytes(&self) -> u64 {
        self.partitions
            .iter()
            .flat_map(|p| &p.segments)
            .map(|s| s.file_bytes)
            .sum()
    }

    /// Segments in all partitions.
    pub fn segments(&self) -> usize {
        self.partitions.iter().map(|p| p.segments.len()).sum()
    }

    /// Valid records of every segment by kind, in kind order; kinds with no
    /// record are left out.
    pub fn records_by_kind(&self) -> Vec<(RecordKind, KindTally)> {
        let mut total = [KindTally::default(); KIND_SLOTS];
        for s in self.partitions.iter().flat_map(|p| &p.segments) {
            for (t, k) in total.iter_mut().zip(&s.by_kind) {
                t.records += k.records;
                t.bytes += k.bytes;
                t.header_bytes += k.header_bytes;
            }
        }
        total
            .iter()
            .enumerate()
            .filter(|(_, t)| t.records > 0)
            .filter_map(|(b, t)| Some((RecordKind::from_byte(b as u8)?, *t)))
            .collect()
    }
}

/// Slots of [`SegmentInfo::by_kind`]: one per kind byte, 0 unused.
const KIND_SLOTS: usize = 10;
const _: () = assert!(RecordKind::Separator as usize == KIND_SLOTS - 1);

/// Records of one kind and the bytes they occupy, headers and padding
/// included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindTally {
    pub records: u64,
    pub bytes: u64,
    /// Of `bytes`, the record headers' (they vary in size since log format 5).
    pub header_bytes: u64,
}

/// The checkpoint metadata file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointState {
    /// No open with a log has written it yet.
    Absent,
    /// The recorded log floor and synced log positions.
    Present(meta::Meta),
    /// Present but unreadable (the error recovery would report).
    Unreadable(String),
}

/// One log partition directory (`wal/pNNNNN`).
#[derive(Debug, Clone)]
pub struct PartitionInfo {
    pub id: u32,
    pub path: PathBuf,
    /// Segments in stream order.
    pub segments: Vec<SegmentInfo>,
    /// Files in the directory that are not segments (recovery ignores them).
    pub other_files: Vec<PathBuf>,
}

/// What a segment's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentHeader {
    /// A header of this build's format naming `partition` and `start`
    /// (which should equal the directory's and the file name's).
    Valid { partition: u32, start: LogPos },
    /// Short, zero or failing its checksum: never synced; recovery removes
    /// the file.
    Torn,
    /// Another format version: recovery refuses to open the database.
    UnsupportedVersion(u32),
    /// Another persistence scheme's segment (its header's scheme tag):
    /// recovery refuses to open the database.
    OtherScheme(u8),
    /// Bad magic: recovery reports corruption.
    Corrupt(String),
}

/// How the scan of a segment's records ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentEnd {
    /// At the end of the file (or in zero bytes never written).
    Clean,
    /// At a bad record no later durable record vouches for: the end of the
    /// log; recovery truncates here. `offset` is a file offset.
    TornTail { offset: u64, error: String },
    /// At bytes that are not a record, exactly where the next segment
    /// starts: the segment ended there, and the rest of the file is a
    /// recycled file's previous life (recovery reads on). `offset` is a
    /// file offset.
    Ended { offset: u64 },
    /// At a bad record that was durable: recovery refuses the log.
    Corrupt { offset: u64, detail: String },
    /// The records were not scanned (the header is not valid).
    NotScanned,
}

/// One segment file.
#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub path: PathBuf,
    /// Stream position of the first record (from the file name).
    pub start: LogPos,
    pub file_bytes: u64,
    pub header: SegmentHeader,
    /// Valid records before the end of the scan.
    pub records: u64,
    /// Of which with a GSN above the log floor (what recovery would use).
    pub records_above_floor: u64,
    /// GSN of the first and the last valid record.
    pub first_gsn: Option<Gsn>,
    pub last_gsn: Option<Gsn>,
    /// Smallest and largest GSN among the valid records.
    pub min_gsn: Option<Gsn>,
    pub max_gsn: Option<Gsn>,
    /// Bytes of valid records (after the header).
    pub valid_bytes: u64,
    /// Valid records and their bytes, indexed by kind byte.
    pub by_kind: [KindTally; KIND_SLOTS],
    pub end: SegmentEnd,
}

impl SegmentInfo {
    /// Valid commit records.
    pub fn commits(&self) -> u64 {
        self.by_kind[RecordKind::Commit as usize].records
    }
}

/// Inspect the database in `dir` on the real file system, read-only.
pub fn inspect(dir: impl AsRef<Path>) -> Result<DatabaseInfo> {
    inspect_with(&RealStorage::new(), dir.as_ref())
}

/// [`inspect`] on any storage.
pub fn inspect_with(storage: &dyn Storage, dir: &Path) -> Result<DatabaseInfo> {
    let data_path = dir.join(DATA_FILE);
    if !storage.exists(&data_path) {
        return Err(Error::NotADatabase { path: data_path });
    }
    let data = storage.open(&data_path, OpenMode::ReadOnly)?;
    let superblock = Superblock::read(data.as_ref())?;
    let data_file_bytes = data.len()?;
    drop(data);
    let dw_path = dir.join(DOUBLE_WRITE_FILE);
    let double_write_bytes = if storage.exists(&dw_path) {
        Some(storage.open(&dw_path, OpenMode::ReadOnly)?.len()?)
    } else {
        None
    };
    let checkpoint = match meta::read(storage, dir) {
        Ok(None) => CheckpointState::Absent,
        Ok(Some(m)) => CheckpointState::Present(m),
        Err(e) => CheckpointState::Unreadable(e.to_string()),
    };
    let log_floor = match &checkpoint {
        CheckpointState::Present(m) => superblock.log_floor.max(m.floor),
        _ => superblock.log_floor,
    };
    let log_dir = dir.join(WAL_DIR);
    // The log is read as the superblock's scheme's (the per-worker
    // scheme's if it records none, or one without a log).
    let scheme = superblock
        .scheme
        .filter(|k| k.recovers_from_log())
        .unwrap_or(SchemeKind::PerWorker);
    let mut partitions = Vec::new();
    for id in partition_ids(storage, &log_dir)? {
        partitions.push(inspect_partition(storage, &log_dir, scheme, id, log_floor)?);
    }
    Ok(DatabaseInfo {
        dir: dir.to_path_buf(),
        db_format_version: DB_FORMAT_VERSION,
        page_format_version: PAGE_FORMAT_VERSION,
        log_format_version: LOG_FORMAT_VERSION,
        checkpoint_format_version: meta::META_FORMAT_VERSION,
        data_file_pages: data_file_bytes / u64::from(superblock.page_size),
        superblock,
        data_file_bytes,
        double_write_bytes,
        checkpoint,
        log_floor,
        partitions,
        silor: crate::silor::checkpoint::inspect(storage, dir)?,
        command: crate::command::snapshot::inspect(storage, dir)?,
    })
}

fn inspect_partition(
    storage: &dyn Storage,
    log_dir: &Path,
    scheme: SchemeKind,
    id: u32,
    floor: Gsn,
) -> Result<PartitionInfo> {
    let path = partition_dir(log_dir, id);
    let mut segments = Vec::new();
    let mut other_files = Vec::new();
    for file in storage.list_dir(&path)? {
        match parse_segment_name(&file) {
            Some(start) => segments.push(inspect_segment(storage, &file, scheme, start, floor)?),
            None => other_files.push(file),
        }
    }
    segments.sort_by_key(|s| s.start);
    // The rule recovery applies (wal/recovery/partition_log.rs): records that stop where
    // the next segment starts are that segment's end, not a torn write.
    for i in 1..segments.len() {
        let next = segments[i].start;
        let s = &mut segments[i - 1];
        if let SegmentEnd::TornTail { offset, .. } = s.end {
            if s.start.advance(s.valid_bytes) == next {
                s.end = SegmentEnd::Ended { offset };
            }
        }
    }
    Ok(PartitionInfo {
        id,
        path,
        segments,
        other_files,
    })
}

fn inspect_segment(
    storage: &dyn Storage,
    path: &Path,
    scheme: SchemeKind,
    start: LogPos,
    floor: Gsn,
) -> Result<SegmentInfo> {
    let file = storage.open(path, OpenMode::ReadOnly)?;
    let file_bytes = file.len()?;
    let mut whole = vec![0u8; file_bytes as usize];
    file.read_at(&mut whole, 0)?;
    let mut info = SegmentInfo {
        path: path.to_path_buf(),
        start,
        file_bytes,
        header: SegmentHeader::Torn,
        records: 0,
        records_above_floor: 0,
        first_gsn: None,
        last_gsn: None,
        min_gsn: None,
        max_gsn: None,
        valid_bytes: 0,
        by_kind: [KindTally::default(); KIND_SLOTS],
        end: SegmentEnd::NotScanned,
    };
    info.header = match segment::decode_header(path, &whole, scheme) {
        Ok(segment::Header::Valid { stream, start }) => SegmentHeader::Valid {
            partition: stream,
            start,
        },
        Ok(segment::Header::Torn) => SegmentHeader::Torn,
        Err(Error::UnsupportedFormatVersion { found, .. }) => {
            SegmentHeader::UnsupportedVersion(found)
        }
        Err(Error::LogSchemeMismatch { found, .. }) => SegmentHeader::OtherScheme(found),
        Err(e) => SegmentHeader::Corrupt(e.to_string()),
    };
    if !matches!(info.header, SegmentHeader::Valid { .. }) {
        return Ok(info);
    }
    let buf = &whole[segment::HEADER_SIZE as usize..];
    let scan = record::scan_segment(buf, start);
    for (_, rec) in &scan.records {
        let gsn = rec.header.gsn;
        info.records += 1;
        let tally = &mut info.by_kind[rec.body.kind() as usize];
        tally.records += 1;
        tally.bytes += rec.encoded_len() as u64;
        tally.header_bytes += record::header_len(&rec.header, rec.body.kind()) as u64;
        info.records_above_floor += u64::from(gsn > floor);
        info.first_gsn.get_or_insert(gsn);
        info.last_gsn = Some(gsn);
        info.min_gsn = Some(info.min_gsn.map_or(gsn, |m| m.min(gsn)));
        info.max_gsn = Some(info.max_gsn.map_or(gsn, |m| m.max(gsn)));
    }
    info.valid_bytes = scan.valid_len;
    info.end = match scan.end {
        ScanEnd::Clean => SegmentEnd::Clean,
        ScanEnd::TornTail { offset, error } => SegmentEnd::TornTail {
            offset: segment::HEADER_SIZE + offset,
            error: error.to_string(),
        },
        ScanEnd::Corrupt { offset, detail } => SegmentEnd::Corrupt {
            offset: segment::HEADER_SIZE + offset,
            detail,
        },
    };
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{CrashPolicy, SimStorage};
    use crate::{Database, Options};
    use std::sync::Arc;

    fn options(sim: &SimStorage) -> Options {
        Options {
            storage: Some(Arc::new(sim.clone()) as Arc<dyn Storage>),
            page_size: Some(4096),
            buffer_pool_bytes: 1 << 20,
            ..Options::default()
        }
    }

    /// Every file's bytes and every directory's entries, to show that
    /// inspecting changed nothing.
    fn snapshot(sim: &SimStorage, dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for p in sim.list_dir(&d).unwrap() {
                match sim.open(&p, OpenMode::ReadOnly) {
                    Ok(f) => {
                        let mut b = vec![0; f.len().unwrap() as usize];
                        f.read_at(&mut b, 0).unwrap();
                        out.push((p, b));
                    }
                    Err(_) => {
                        out.push((p.clone(), Vec::new()));
                        stack.push(p);
                    }
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn inspect_reports_the_log_of_a_crashed_database_and_changes_nothing() {
        let sim = SimStorage::new(7);
        let dir = Path::new("/db");
        let db = Database::open(dir, options(&sim)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut s = db.session();
        for i in 0..50u32 {
            let mut tx = s.begin().unwrap();
            tx.insert(&t, &i.to_be_bytes(), b"value").unwrap();
            tx.commit().unwrap();
        }
        drop(s);
        // A killed process: the database is not closed.
        std::mem::forget(db);
        sim.crash(CrashPolicy::KeepAll);

        let before = snapshot(&sim, dir);
        let info = inspect_with(&sim, dir).unwrap();
        assert_eq!(snapshot(&sim, dir), before, "inspect changed the files");
        assert_eq!(info.superblock.page_size, 4096);
        assert!(!info.superblock.clean);
        assert_eq!(info.data_file_pages * 4096, info.data_file_bytes);
        assert_eq!(info.log_format_version, LOG_FORMAT_VERSION);
        // The session's partition and the system partition (the DDL).
        assert!(info.partitions.len() >= 2, "{:?}", info.partitions);
        let segs: Vec<&SegmentInfo> = info.partitions.iter().flat_map(|p| &p.segments).collect();
        assert!(segs
            .iter()
            .all(|s| matches!(s.header, SegmentHeader::Valid { .. })));
        let commits: u64 = segs.iter().map(|s| s.commits()).sum();
        assert!(commits >= 50, "{commits} commit records");
        for s in &segs {
            if s.records > 0 {
                assert!(s.first_gsn.unwrap() <= s.last_gsn.unwrap());
                assert_eq!(s.end, SegmentEnd::Clean);
            }
        }
        assert_eq!(
            info.log_bytes(),
            segs.iter().map(|s| s.file_bytes).sum::<u64>()
        );
        // The tally by kind accounts for every valid record and byte.
        let kinds = info.records_by_kind();
        let tally = |kind| kinds.iter().find(|(k, _)| *k == kind).map(|(_, t)| *t);
        assert_eq!(
            kinds.iter().map(|(_, t)| t.records).sum::<u64>(),
            segs.iter().map(|s| s.records).sum::<u64>()
        );
        assert_eq!(
            kinds.iter().map(|(_, t)| t.bytes).sum::<u64>(),
            segs.iter().map(|s| s.valid_bytes).sum::<u64>()
        );
        assert_eq!(tally(RecordKind::Commit).unwrap().records, commits);
        assert!(tally(RecordKind::Insert).unwrap().records >= 50);
        assert!(kinds.windows(2).all(|w| (w[0].0 as u8) < (w[1].0 as u8)));

        // Recovery then finds what inspect reported.
        let db = Database::open(dir, options(&sim)).unwrap();
        let r = db.recovery_report().unwrap().clone();
        assert_eq!(r.partitions, info.partitions.len());
        assert_eq!(
            r.records,
            segs.iter().map(|s| s.records_above_floor).sum::<u64>()
        );
        db.close().unwrap();
        // A clean close leaves no log.
        let info = inspect_with(&sim, dir).unwrap();
        assert!(info.superblock.clean);
        assert_eq!(info.segments(), 0);
    }

    #[test]
    fn a_directory_without_a_database_is_refused() {
        let sim = SimStorage::new(1);
        sim.create_dir_all(Path::new("/empty")).unwrap();
        assert!(matches!(
            inspect_with(&sim, Path::new("/empty")),
            Err(Error::NotADatabase { .. })
        ));
    }
}
