//! `waypoint verify` (a workload's invariants on a database, after the
//! recovery that opening it does) and `waypoint inspect` (what the files
//! of a database hold, read-only: nothing is recovered or changed).

use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use waypoint::inspect::{CheckpointState, DatabaseInfo, SegmentEnd, SegmentHeader};
use waypoint::wal::record::RecordKind;
use waypoint::{Gsn, LogPos};
use waypoint_bench::registry;
use waypoint_bench::summary::RecoverySummary;

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Database directory.
    pub dir: PathBuf,
    /// The workload whose invariants to check: tpcc, tpcb, ycsb or voter. Its
    /// scale is read from the database.
    #[arg(long)]
    pub workload: String,
    /// Buffer pool memory for the check, e.g. 256MiB [default: 256MiB].
    #[arg(long)]
    pub buffer: Option<String>,
    /// Open with this persistence scheme (per-worker, aries, aether, silor
    /// or none)
    /// [default: the one the database records].
    #[arg(long)]
    pub scheme: Option<String>,
    /// Print what was checked as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct InspectArgs {
    /// Database directory.
    pub dir: PathBuf,
    /// Print everything as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The persistence to open the existing database in `dir` with: the
/// scheme `given` (`--scheme`), or the one its superblock records (the
/// per-worker scheme if it records none or cannot be read: the open then
/// refuses what is not a database), with its default options.
pub fn persistence_for(dir: &Path, given: Option<&str>) -> Result<waypoint::Persistence> {
    use waypoint::{SchemeKind, Storage};
    let kind = match given {
        Some(name) => match SchemeKind::parse(name) {
            Some(k) => k,
            None => {
                let names: Vec<_> = SchemeKind::ALL.iter().map(|k| k.name()).collect();
                bail!("unknown --scheme {name:?}; available: {}", names.join(", "))
            }
        },
        // A superblock that cannot be read is the open's to refuse, with
        // its own error.
        None => waypoint::RealStorage::new()
            .open(&dir.join(waypoint::DATA_FILE), waypoint::OpenMode::ReadOnly)
            .and_then(|file| waypoint::db::Superblock::read(file.as_ref()))
            .ok()
            .and_then(|sb| sb.scheme)
            .unwrap_or_default(),
    };
    Ok(waypoint::Persistence::of(
        kind,
        waypoint::PerWorkerOptions::default(),
    ))
}

/// Refuse a directory without a data file before anything opens it.
pub fn require_database(dir: &Path) -> Result<()> {
    let data = dir.join(waypoint::DATA_FILE);
    if !dir.is_dir() {
        bail!("{} does not exist or is not a directory", dir.display());
    }
    if !data.is_file() {
        bail!(
            "{} is not a waypoint database (no {})",
            dir.display(),
            waypoint::DATA_FILE
        );
    }
    // Opening would initialise an empty data file as a new database.
    if std::fs::metadata(&data).map_or(true, |m| m.len() == 0) {
        bail!(
            "{} is not a waypoint database ({} is empty)",
            dir.display(),
            waypoint::DATA_FILE
        );
    }
    Ok(())
}

pub fn verify(args: VerifyArgs) -> Result<()> {
    registry::check_name(&args.workload)?;
    require_database(&args.dir)?;
    let buffer = crate::args::parse_size("buffer", args.buffer.as_deref().unwrap_or("256MiB"))?;
    let options = waypoint::Options {
        create_if_missing: false,
        buffer_pool_bytes: buffer,
        persistence: persistence_for(&args.dir, args.scheme.as_deref())?,
        procedures: waypoint_bench::procedures(),
        ..Default::default()
    };
    options
        .validate()
        .map_err(|e| crate::args::name_flag(e, &[("buffer_pool_bytes", "--buffer")]))?;
    let t0 = std::time::Instant::now();
    let db = waypoint::Database::open(&args.dir, options)
        .with_context(|| format!("cannot open {}", args.dir.display()))?;
    let recovery = db
        .recovery_report()
        .filter(|r| RecoverySummary::needed(r))
        .map(|r| RecoverySummary::of(r, t0.elapsed()));
    let outcome = registry::reopen(&db, &args.workload).and_then(|w| {
        let checked = w.verify(&db)?;
        Ok((w.config_json(), checked))
    });
    // Close cleanly whatever the check found: what recovery did stays done.
    let closed = db.close();
    let (config, checked) = outcome?;
    closed.context("clean close after the check")?;
    if args.json {
        let v = json!({
            "dir": args.dir, "workload": args.workload, "config": config,
            "checked": checked, "recovery": recovery,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        if let Some(r) = &recovery {
            print!("{}", r.lines());
        }
        println!(
            "{}: the {} invariants hold ({config})",
            args.dir.display(),
            args.workload
        );
        println!("checked: {checked}");
    }
    Ok(())
}

pub fn inspect(args: InspectArgs) -> Result<()> {
    require_database(&args.dir)?;
    let info = waypoint::inspect::inspect(&args.dir)
        .with_context(|| format!("cannot inspect {}", args.dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&info))?);
    } else {
        print!("{}", to_text(&info));
    }
    Ok(())
}

fn checkpoint_json(c: &CheckpointState) -> serde_json::Value {
    match c {
        CheckpointState::Absent => json!({ "present": false }),
        CheckpointState::Present(m) => json!({
            "present": true, "version": m.version, "floor": m.floor.get(),
            "synced": m.synced.iter().map(|(p, pos)| json!({ "partition": p, "position": pos.get() })).collect::<Vec<_>>(),
        }),
        CheckpointState::Unreadable(e) => json!({ "present": true, "error": e }),
    }
}

fn header_json(h: &SegmentHeader) -> serde_json::Value {
    match h {
        SegmentHeader::Valid { partition, start } => {
            json!({ "state": "valid", "partition": partition, "start": start.get() })
        }
        SegmentHeader::Torn => json!({ "state": "torn" }),
        SegmentHeader::UnsupportedVersion(v) => {
            json!({ "state": "unsupported_version", "version": v })
        }
        SegmentHeader::OtherScheme(tag) => json!({ "state": "other_scheme", "scheme_tag": tag }),
        SegmentHeader::Corrupt(e) => json!({ "state": "corrupt", "error": e }),
    }
}

fn end_json(e: &SegmentEnd) -> serde_json::Value {
    match e {
        SegmentEnd::Clean => json!({ "state": "clean" }),
        SegmentEnd::TornTail { offset, error } => {
            json!({ "state": "torn_tail", "offset": offset, "error": error })
        }
        SegmentEnd::Ended { offset } => json!({ "state": "ended", "offset": offset }),
        SegmentEnd::Corrupt { offset, detail } => {
            json!({ "state": "corrupt", "offset": offset, "error": detail })
        }
        SegmentEnd::NotScanned => json!({ "state": "not_scanned" }),
    }
}

fn to_json(i: &DatabaseInfo) -> serde_json::Value {
    let sb = &i.superblock;
    let partitions: Vec<serde_json::Value> = i
        .partitions
        .iter()
        .map(|p| {
            let segments: Vec<serde_json::Value> = p
                .segments
                .iter()
                .map(|s| {
                    json!({
                        "path": s.path, "start": s.start.get(), "bytes": s.file_bytes,
                        "header": header_json(&s.header), "records": s.records,
                        "commits": s.commits(), "records_above_floor": s.records_above_floor,
                        "first_gsn": s.first_gsn.map(Gsn::get), "last_gsn": s.last_gsn.map(Gsn::get),
                        "min_gsn": s.min_gsn.map(Gsn::get), "max_gsn": s.max_gsn.map(Gsn::get),
                        "valid_bytes": s.valid_bytes, "end": end_json(&s.end),
                    })
                })
                .collect();
            json!({
                "id": p.id, "path": p.path,
                "bytes": p.segments.iter().map(|s| s.file_bytes).sum::<u64>(),
                "first_gsn": p.segments.iter().find_map(|s| s.first_gsn).map(Gsn::get),
                "last_gsn": p.segments.iter().rev().find_map(|s| s.last_gsn).map(Gsn::get),
                "segments": segments, "other_files": p.other_files,
            })
        })
        .collect();
    json!({
        "dir": i.dir,
        "format": {
            "database": i.db_format_version, "page": i.page_format_version,
            "log": i.log_format_version, "checkpoint_metadata": i.checkpoint_format_version,
        },
        "page_size": sb.page_size,
        "superblock": {
            "next_page_id": sb.next_page_id, "catalog_root": sb.catalog_root,
            "free_list_head": sb.free_list_head, "clean": sb.clean,
            "log_required": sb.log_required, "epoch": sb.epoch, "log_floor": sb.log_floor.get(),
        },
        "data_file": { "bytes": i.data_file_bytes, "pages": i.data_file_pages },
        "double_write_bytes": i.double_write_bytes,
        "checkpoint": checkpoint_json(&i.checkpoint),
        "log_floor": i.log_floor.get(),
        "log": {
            "partitions": i.partitions.len(), "segments": i.segments(), "bytes": i.log_bytes(),
            "records_by_kind": i.records_by_kind().iter().map(|(k, t)| json!({
                "kind": kind_name(*k), "records": t.records, "bytes": t.bytes,
                "header_bytes": t.header_bytes,
            })).collect::<Vec<_>>(),
        },
        "partitions": partitions,
        "silor": silor_json(&i.silor),
        "command": command_json(&i.command),
    })
}

fn size(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    }
}

fn gsn(g: Option<Gsn>) -> String {
    g.map_or("-".to_string(), |g| g.to_string())
}

/// The `silor` scheme's pepoch file and checkpoints, if it left any.
fn silor_text(f: &waypoint::silor::checkpoint::SilorFiles) -> String {
    let mut out = String::new();
    match &f.pepoch {
        None => {}
        Some(Err(e)) => out += &format!("  silor pepoch file: unreadable: {e}\n"),
        Some(Ok(p)) => {
            out += &format!(
                "  silor pepoch file: generation {}, pepoch {}, sealed generations {:?}{}, installed checkpoint {}\n",
                p.generation,
                p.pepoch,
                p.sealed,
                if p.closing { ", closing" } else { "" },
                match p.checkpoint {
                    Some((id, el, eh)) => format!("{id} (epochs {el} to {eh})"),
                    None => "none".into(),
                }
            );
        }
    }
    for c in &f.checkpoints {
        out += &format!(
            "  silor checkpoint {}{}\n",
            c.id,
            if c.installed {
                " (installed)"
            } else {
                " (not installed)"
            }
        );
        for (path, bytes, rows) in &c.files {
            let rows = match rows {
                Ok(n) => format!("{n} rows"),
                Err(e) => format!("unreadable: {e}"),
            };
            out += &format!("    {} {} {rows}\n", path.display(), size(*bytes));
        }
    }
    out
}

fn silor_json(f: &waypoint::silor::checkpoint::SilorFiles) -> serde_json::Value {
    let pepoch = match &f.pepoch {
        None => json!(null),
        Some(Err(e)) => json!({ "error": e }),
        Some(Ok(p)) => json!({
            "generation": p.generation, "pepoch": p.pepoch, "sealed": p.sealed,
            "closing": p.closing,
            "checkpoint": p.checkpoint.map(|(id, el, eh)| json!({ "id": id, "el": el, "eh": eh })),
        }),
    };
    let checkpoints: Vec<serde_json::Value> = f
        .checkpoints
        .iter()
        .map(|c| {
            json!({
                "id": c.id, "installed": c.installed,
                "files": c.files.iter().map(|(p, b, r)| match r {
                    Ok(rows) => json!({ "path": p, "bytes": b, "rows": rows }),
                    Err(e) => json!({ "path": p, "bytes": b, "error": e }),
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "pepoch": pepoch, "checkpoints": checkpoints })
}

/// The `command` scheme's installed snapshot and snapshot files, if any.
fn command_text(f: &waypoint::command::snapshot::CommandFiles) -> String {
    let mut out = String::new();
    match &f.installed {
        None => {}
        Some(Err(e)) => out += &format!("  command snapshot meta file: unreadable: {e}\n"),
        Some(Ok((id, g, pos, seq))) => {
            out += &format!(
                "  command installed snapshot {id}: after call {seq} (generation {g}, log position {pos})\n"
            );
        }
    }
    for s in &f.snapshots {
        out += &format!(
            "  command snapshot {}{}\n",
            s.id,
            if s.installed {
                " (installed)"
            } else {
                " (not installed)"
            }
        );
        for (path, bytes, rows) in &s.files {
            let rows = match rows {
                Ok(n) => format!("{n} rows"),
                Err(e) => format!("unreadable: {e}"),
            };
            out += &format!("    {} {} {rows}\n", path.display(), size(*bytes));
        }
    }
    out
}

fn command_json(f: &waypoint::command::snapshot::CommandFiles) -> serde_json::Value {
    let installed = match &f.installed {
        None => json!(null),
        Some(Err(e)) => json!({ "error": e }),
        Some(Ok((id, g, pos, seq))) => {
            json!({ "id": id, "generation": g, "position": pos, "sequence": seq })
        }
    };
    let snapshots: Vec<serde_json::Value> = f
        .snapshots
        .iter()
        .map(|s| {
            json!({
                "id": s.id, "installed": s.installed,
                "files": s.files.iter().map(|(p, b, r)| match r {
                    Ok(rows) => json!({ "path": p, "bytes": b, "rows": rows }),
                    Err(e) => json!({ "path": p, "bytes": b, "error": e }),
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "installed": installed, "snapshots": snapshots })
}

fn to_text(i: &DatabaseInfo) -> String {
    let sb = &i.superblock;
    let mut out = format!("waypoint database {}\n", i.dir.display());
    out += &format!(
        "  formats: database {}, page {}, log {}, checkpoint metadata {}\n",
        i.db_format_version,
        i.page_format_version,
        i.log_format_version,
        i.checkpoint_format_version
    );
    out += &format!(
        "  data file: {} ({} pages of {} bytes; next page id {}, free-list head {})\n",
        size(i.data_file_bytes),
        i.data_file_pages,
        sb.page_size,
        sb.next_page_id,
        sb.free_list_head
    );
    if let Some(b) = i.double_write_bytes {
        out += &format!("  double-write file: {}\n", size(b));
    }
    out += &format!(
        "  closed cleanly: {} (epoch {}){}\n",
        if sb.clean { "yes" } else { "no" },
        sb.epoch,
        if sb.clean {
            ""
        } else {
            "; the next open recovers from the log"
        }
    );
    let ckpt = match &i.checkpoint {
        CheckpointState::Absent => "absent".to_string(),
        CheckpointState::Present(m) => format!(
            "floor {}, synced positions of {} partitions",
            m.floor,
            m.synced.len()
        ),
        CheckpointState::Unreadable(e) => format!("unreadable: {e}"),
    };
    out += &format!(
        "  log floor {} (superblock {}, checkpoint.waypoint {ckpt})\n",
        i.log_floor, sb.log_floor
    );
    out += &silor_text(&i.silor);
    out += &command_text(&i.command);
    out += &format!(
        "  log: {} partitions, {} segments, {}\n",
        i.partitions.len(),
        i.segments(),
        size(i.log_bytes())
    );
    if i.segments() > 0 {
        out += &format!(
            "  {:<7} {:>20} {:>11} {:>9} {:>8} {:>9} {:>12} {:>12}  end\n",
            "part", "start", "bytes", "records", "commits", ">floor", "first GSN", "last GSN"
        );
    }
    for p in &i.partitions {
        for s in &p.segments {
            let end = match (&s.header, &s.end) {
                (SegmentHeader::Torn, _) => "header torn (never synced)".to_string(),
                (SegmentHeader::UnsupportedVersion(v), _) => format!("log format version {v}"),
                (SegmentHeader::OtherScheme(tag), _) => {
                    format!("another scheme's segment (tag {tag})")
                }
                (SegmentHeader::Corrupt(e), _) => format!("header corrupt: {e}"),
                (_, SegmentEnd::Clean) => "clean".to_string(),
                (_, SegmentEnd::TornTail { offset, error }) => {
                    format!("torn tail at {offset} ({error})")
                }
                (_, SegmentEnd::Ended { offset }) => {
                    format!("ends at {offset}, where the next segment starts (a recycled file's old bytes follow)")
                }
                (_, SegmentEnd::Corrupt { offset, detail }) => {
                    format!("CORRUPT at {offset}: {detail}")
                }
                (_, SegmentEnd::NotScanned) => "not scanned".to_string(),
            };
            out += &format!(
                "  p{:05} {:>20} {:>11} {:>9} {:>8} {:>9} {:>12} {:>12}  {end}\n",
                p.id,
                s.start,
                s.file_bytes,
                s.records,
                s.commits(),
                s.records_above_floor,
                gsn(s.first_gsn),
                gsn(s.last_gsn)
            );
        }
        for f in &p.other_files {
            out += &format!("  p{:05} not a segment: {}\n", p.id, f.display());
        }
        if let CheckpointState::Present(m) = &i.checkpoint {
            if m.synced(p.id) > LogPos::ZERO {
                out += &format!(
                    "  p{:05} synced up to stream position {} (checkpoint.waypoint)\n",
                    p.id,
                    m.synced(p.id)
                );
            }
        }
    }
    out += &kinds_text(i);
    out
}

/// The log's valid records by kind: what its volume is made of.
fn kinds_text(i: &DatabaseInfo) -> String {
    let kinds = i.records_by_kind();
    let (records, bytes, headers) = kinds.iter().fold((0, 0, 0), |(r, b, h), (_, t)| {
        (r + t.records, b + t.bytes, h + t.header_bytes)
    });
    if records == 0 {
        return String::new();
    }
    let mut out = format!(
        "  log records by kind:\n  {:<10} {:>12} {:>12} {:>7} {:>13}\n",
        "kind", "records", "bytes", "share", "bytes/record"
    );
    for (kind, t) in &kinds {
        out += &format!(
            "  {:<10} {:>12} {:>12} {:>6.1}% {:>13.1}\n",
            kind_name(*kind),
            t.records,
            size(t.bytes),
            t.bytes as f64 * 100.0 / bytes as f64,
            t.bytes as f64 / t.records as f64
        );
    }
    out += &format!(
        "  {:<10} {:>12} {:>12}  headers ({:.1} bytes each) are {:.1}% of it\n",
        "all",
        records,
        size(bytes),
        headers as f64 / records as f64,
        headers as f64 * 100.0 / bytes as f64
    );
    out
}

fn kind_name(kind: RecordKind) -> String {
    format!("{kind:?}").to_lowercase()
}
