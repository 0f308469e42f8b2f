//! The `waypoint` command: benchmarks and tools over the engine.
//!
//! Every error ends the program with a one-line message and exit code 1;
//! nothing is overwritten on bad input.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use waypoint_bench::engine::{self, EngineConfig};

#[derive(Parser)]
#[command(
    name = "waypoint",
    version,
    about = "waypoint storage engine: benchmarks and tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a benchmark and print a report.
    Bench(BenchArgs),
    /// Open a database, recover it from its log, and report what recovery did.
    Recover {
        /// Database directory.
        dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check the structure of every table and index of a closed database.
    Check {
        /// Database directory.
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Workload. Available now: `engine` (load, point reads, range scans,
    /// clean close, verified reopen) and `updates` (small update
    /// transactions: the commit path under each commit protocol). TPC-C,
    /// YCSB, TPC-B and Voter follow.
    workload: String,
    /// Database directory (default: a fresh temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Seconds for each timed phase.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Buffer pool memory, e.g. 64MiB or 1GiB.
    #[arg(long, default_value = "1GiB")]
    buffer: String,
    /// Page size, e.g. 16KiB.
    #[arg(long, default_value = "16KiB")]
    page_size: String,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Directory for summary.json (created if missing).
    #[arg(long)]
    out: Option<PathBuf>,
    /// per-worker (a log partition per session, seed 000) or none.
    #[arg(long, default_value = "per-worker")]
    logging: String,
    /// Commit protocol: rfa-group, group, rfa, flush-all or async.
    #[arg(long, default_value = "rfa-group")]
    commit: String,
    /// `updates`: commits in flight per worker (1 = wait for each).
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// `updates`: records updated per transaction.
    #[arg(long, default_value_t = 4)]
    updates_per_txn: usize,
}

fn parse_size(what: &str, s: &str) -> Result<usize> {
    let n = parse_size::parse_size(s)
        .with_context(|| format!("--{what} {s:?} is not a size (examples: 64MiB, 1GiB, 16KiB)"))?;
    usize::try_from(n).with_context(|| format!("--{what} {s:?} is too large"))
}

fn bench(args: BenchArgs) -> Result<()> {
    match args.workload.as_str() {
        "engine" | "updates" => {}
        "tpcc" | "ycsb" | "tpcb" | "voter" => bail!(
            "workload {:?} is not implemented yet; available: engine, updates",
            args.workload
        ),
        other => bail!("unknown workload {other:?}; available: engine, updates"),
    }
    if args.workers == 0 || args.records == 0 || args.duration.is_nan() || args.duration <= 0.0 {
        bail!("--workers, --records and --duration must be positive");
    }
    if let Some(dir) = &args.dir {
        if dir.join(waypoint::db::DATA_FILE).exists() {
            bail!(
                "{} already holds a database; the engine benchmark needs an empty directory",
                dir.display()
            );
        }
    }
    let logging = match args.logging.as_str() {
        "per-worker" => waypoint::Logging::PerWorker,
        "none" => waypoint::Logging::None,
        other => bail!("unknown --logging {other:?}; available: per-worker, none"),
    };
    let Some(commit) = waypoint::CommitProtocol::parse(&args.commit) else {
        bail!(
            "unknown --commit {:?}; available: rfa-group, group, rfa, flush-all, async",
            args.commit
        );
    };
    if args.workload == "updates" {
        return bench_updates(&args, logging, commit);
    }
    let config = EngineConfig {
        logging,
        commit,
        logging_name: args.logging.clone(),
        commit_name: args.commit.clone(),
        dir: args.dir.clone(),
        workers: args.workers,
        records: args.records,
        value_size: args.value_size,
        buffer_bytes: parse_size("buffer", &args.buffer)?,
        page_size: parse_size("page-size", &args.page_size)?,
        duration_secs: args.duration,
        seed: args.seed,
        ..EngineConfig::default()
    };
    let data_mib = config.records as f64 * (8 + config.value_size) as f64 / (1 << 20) as f64;
    println!(
        "waypoint bench engine: {} records of {} bytes (~{data_mib:.0} MiB), buffer {}, page {}, {} workers, {} s per timed phase, logging {}, commit {}",
        config.records, config.value_size, args.buffer, args.page_size, config.workers, config.duration_secs, args.logging, args.commit
    );
    let progress = |phase: &str, second: u64, txns: u64| {
        println!("  [{phase:<10}] {second:>4} s  {txns:>12} txns");
    };
    let report = engine::run(&config, &progress).context("benchmark failed")?;
    println!();
    print!("{}", report.table());
    println!(
        "evictions {}, pages read {}, pages written {}; clean close {:.2} s, reopen {:.3} s, {} records verified after reopen",
        report.evictions, report.pages_read, report.pages_written, report.close_seconds, report.reopen_seconds, report.verified_records
    );
    println!(
        "log: {} bytes written ({:.0} bytes per load transaction), {} fdatasyncs",
        report.wal_bytes, report.wal_bytes_per_load_txn, report.wal_syncs
    );
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let path = out.join("summary.json");
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn check(dir: PathBuf) -> Result<()> {
    let options = waypoint::Options {
        create_if_missing: false,
        buffer_pool_bytes: 64 << 20,
        ..Default::default()
    };
    let db = waypoint::Database::open(&dir, options)
        .with_context(|| format!("cannot open {}", dir.display()))?;
    for (name, records) in db.check_integrity()? {
        println!("{name:<32} {records:>12} records  ok");
    }
    db.close()?;
    Ok(())
}

fn bench_updates(
    args: &BenchArgs,
    logging: waypoint::Logging,
    commit: waypoint::CommitProtocol,
) -> Result<()> {
    let config = waypoint_bench::updates::UpdatesConfig {
        dir: args.dir.clone(),
        workers: args.workers,
        records: args.records,
        value_size: args.value_size,
        updates_per_txn: args.updates_per_txn,
        pipeline: args.pipeline,
        duration_secs: args.duration,
        logging,
        commit,
        commit_name: args.commit.clone(),
        seed: args.seed,
    };
    println!(
        "waypoint bench updates: {} records of {} bytes, {} updates per transaction, {} workers, {} in flight per worker, logging {}, commit {}, {} s",
        config.records, config.value_size, config.updates_per_txn, config.workers, config.pipeline, args.logging, args.commit, config.duration_secs
    );
    let r = waypoint_bench::updates::run(&config).context("benchmark failed")?;
    println!(
        "raw 4 KiB write + fdatasync in the same directory: p50 {} µs, p99 {} µs",
        r.fdatasync_us.p50, r.fdatasync_us.p99
    );
    print!(
        "{}",
        waypoint_bench::report::format_table(std::slice::from_ref(&r.run))
    );
    println!(
        "commit latency until durable / fdatasync p50: {:.2}x; log {:.0} bytes per transaction, {} fdatasyncs, remote-flush fraction {:.3}",
        r.run.latency_us.p50 as f64 / r.fdatasync_us.p50.max(1) as f64,
        r.log_bytes_per_txn,
        r.log_syncs,
        r.remote_flush_fraction
    );
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let path = out.join("summary.json");
        std::fs::write(&path, serde_json::to_string_pretty(&r)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn recover(dir: PathBuf, json: bool) -> Result<()> {
    if !dir.join(waypoint::db::DATA_FILE).exists() {
        bail!(
            "{} is not a waypoint database (no {})",
            dir.display(),
            waypoint::db::DATA_FILE
        );
    }
    let options = waypoint::Options {
        create_if_missing: false,
        buffer_pool_bytes: 256 << 20,
        ..Default::default()
    };
    let db = waypoint::Database::open(&dir, options)
        .with_context(|| format!("cannot recover {}", dir.display()))?;
    let r = db.recovery_report().cloned().unwrap_or_default();
    if json {
        let v = serde_json::json!({
            "partitions": r.partitions, "segments": r.segments, "records": r.records,
            "log_bytes": r.log_bytes, "torn_tails": r.torn_tails, "winners": r.winners,
            "losers": r.losers, "pages_redone": r.pages_redone, "records_redone": r.records_redone,
            "records_undone": r.records_undone, "undo_groups": r.undo_groups, "gaps": r.gaps,
            "committed_beyond_gap": r.committed_beyond_gap, "repaired_torn_pages": r.repaired_torn_pages,
            "analysis_seconds": r.analysis.as_secs_f64(), "redo_seconds": r.redo.as_secs_f64(),
            "undo_seconds": r.undo.as_secs_f64(), "gb_per_sec": r.gb_per_sec(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "recovered {}: {} partitions, {} segments, {} records, {} bytes of log",
            dir.display(),
            r.partitions,
            r.segments,
            r.records,
            r.log_bytes
        );
        println!("  analysis {:>10.3} ms", r.analysis.as_secs_f64() * 1e3);
        println!(
            "  redo     {:>10.3} ms   {} records on {} pages, {} gaps",
            r.redo.as_secs_f64() * 1e3,
            r.records_redone,
            r.pages_redone,
            r.gaps
        );
        println!(
            "  undo     {:>10.3} ms   {} records of {} losers in {} independent groups",
            r.undo.as_secs_f64() * 1e3,
            r.records_undone,
            r.losers,
            r.undo_groups
        );
        println!(
            "  {} winners, {} torn log tails, {} torn pages repaired, {:.3} GB/s",
            r.winners,
            r.torn_tails,
            r.repaired_torn_pages,
            r.gb_per_sec()
        );
    }
    db.close()?;
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench(args),
        Command::Check { dir } => check(dir),
        Command::Recover { dir, json } => recover(dir, json),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
