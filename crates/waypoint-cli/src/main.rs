//! The `waypoint` command: benchmarks, the papers' experiments
//! (`compare`), tools and the crash simulation (`simulate`) over the
//! engine.
//!
//! Every error ends the program with a one-line message and exit code 1 (2
//! for arguments clap cannot parse);
//! nothing is overwritten on bad input.

mod args;
mod bench_driver;
mod bench_engine;
mod compare;
mod crash_child;
mod crash_test;
mod simulate;
mod tools;

use anyhow::{bail, Context, Result};
use args::BenchArgs;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The engine allocates per transaction (write-set keys and values, rows
/// returned by reads and scans); glibc's allocator took 13% of the CPU
/// samples of 2-worker TPC-C with `--logging none` (docs/decisions/measurements.md,
/// "2026-11-23: the sync interval in steady state; ...; mimalloc"). The
/// library leaves the choice to its embedder; this binary picks mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "waypoint",
    version = waypoint_bench::BUILD,
    about = "waypoint storage engine: benchmarks and tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a benchmark and print a report.
    Bench(Box<BenchArgs>),
    /// Run one of the papers' experiments (`--list` shows them) in
    /// interleaved rounds; write report.md, results.json and figures.
    Compare(compare::CompareArgs),
    /// Open a database, recover it from its log, and report what recovery did.
    Recover {
        /// Database directory.
        dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Buffer pool memory, e.g. 256MiB or 1GiB (the default, as for
        /// `bench`). Redo holds every page it changes; with fewer frames
        /// than that it must write pages out while redoing.
        #[arg(long, default_value = "1GiB")]
        buffer: String,
        /// Threads for analysis, redo and undo, 1 to 1024 [default: the
        /// cores this process may use].
        #[arg(long)]
        threads: Option<usize>,
        /// Recover with this persistence scheme (per-worker, aries, aether,
        /// silor or none) [default: the one the database records].
        #[arg(long)]
        scheme: Option<String>,
    },
    /// Check the structure of every table and index of a closed database.
    Check {
        /// Database directory.
        dir: PathBuf,
        /// Open with this persistence scheme [default: the one the
        /// database records].
        #[arg(long)]
        scheme: Option<String>,
    },
    /// Crash simulation on a simulated disk: per seed a workload, an option
    /// set and a fault schedule; recover and check every acknowledged commit.
    Simulate(simulate::SimulateArgs),
    /// Check a workload's invariants on a database (opening it recovers
    /// it); the workload's scale is read from the database.
    Verify(tools::VerifyArgs),
    /// Show what a database's files hold (superblock, data file, checkpoint
    /// metadata, log partitions and segments with their GSN ranges),
    /// read-only: nothing is recovered or changed.
    Inspect(tools::InspectArgs),
    /// Run a workload in a child process, SIGKILL it at a random moment,
    /// recover, verify (invariants and every acknowledged commit), repeat
    /// on the same database.
    CrashTest(crash_test::CrashTestArgs),
    /// The child process of `crash-test`.
    #[command(hide = true)]
    CrashChild(crash_child::CrashChildArgs),
}

fn bench(args: BenchArgs) -> Result<()> {
    let args = args.merge_config_file()?;
    const AVAILABLE: &str = "tpcc, tpcb, ycsb, voter, engine, updates";
    match args.workload.as_str() {
        "tpcc" | "tpcb" | "ycsb" | "voter" | "engine" | "updates" => {}
        other => bail!("unknown workload {other:?}; available: {AVAILABLE}"),
    }
    args.check()?;
    match args.workload.as_str() {
        "engine" => bench_engine::engine(&args),
        "updates" => bench_engine::updates(&args),
        _ => bench_driver::run(&args),
    }
}

fn check(dir: PathBuf, scheme: Option<&str>) -> Result<()> {
    let options = waypoint::Options {
        create_if_missing: false,
        buffer_pool_bytes: 64 << 20,
        persistence: tools::persistence_for(&dir, scheme)?,
        procedures: waypoint_bench::procedures(),
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

fn recover(
    dir: PathBuf,
    json: bool,
    buffer: &str,
    threads: Option<usize>,
    scheme: Option<&str>,
) -> Result<()> {
    // The engine refuses what is not a database, and names the file that
    // is missing from one that is half there (so the recorded scheme is
    // read only where there is a data file to read it from).
    let persistence = tools::persistence_for(&dir, scheme)?;
    let options = waypoint::Options {
        create_if_missing: false,
        buffer_pool_bytes: args::parse_size("buffer", buffer)?,
        recovery_threads: threads.unwrap_or(waypoint::Options::default().recovery_threads),
        persistence,
        procedures: waypoint_bench::procedures(),
        ..Default::default()
    };
    options.validate().map_err(|e| {
        args::name_flag(
            e,
            &[
                ("buffer_pool_bytes", "--buffer"),
                ("recovery_threads", "--threads"),
            ],
        )
    })?;
    let db = waypoint::Database::open(&dir, options)
        .with_context(|| format!("cannot recover {}", dir.display()))?;
    let r = db.recovery_report().cloned().unwrap_or_default();
    // `silor`: the checkpoint load and the log replay, apart (seed 002 §4.3).
    let silor = (db.scheme() == waypoint::SchemeKind::Silor).then(|| db.stats().persistence.silor);
    // `command`: the snapshot load and the re-execution, apart (seed 001 §III-B).
    let command =
        (db.scheme() == waypoint::SchemeKind::Command).then(|| db.stats().persistence.command);
    if json {
        let silor_json = silor.as_ref().map(|s| {
            serde_json::json!({
                "checkpoint_load_seconds": s.checkpoint_load.as_secs_f64(),
                "checkpoint_load_bytes": s.checkpoint_load_bytes,
                "checkpoint_load_rows": s.checkpoint_load_rows,
                "checkpoint_load_gb_per_sec": s.checkpoint_load_gb_per_sec(),
                "log_replay_seconds": s.log_replay.as_secs_f64(),
                "log_replay_bytes": s.recovered_bytes,
                "log_replay_gb_per_sec": s.log_replay_gb_per_sec(),
                "entries": s.recovered_entries, "skipped_entries": s.skipped_entries,
                "below_checkpoint_entries": s.below_checkpoint_entries,
            })
        });
        let command_json = command.as_ref().map(|c| {
            serde_json::json!({
                "snapshot_load_seconds": c.snapshot_load.as_secs_f64(),
                "snapshot_load_rows": c.snapshot_load_rows,
                "snapshot_load_bytes": c.snapshot_load_bytes,
                "snapshot_base_sequence": c.snapshot_base_sequence,
                "records_below_snapshot": c.records_below_snapshot,
                "log_read_seconds": c.log_read.as_secs_f64(),
                "replay_seconds": c.replay.as_secs_f64(),
                "replayed_calls": c.replayed_calls,
                "replayed_catalog_changes": c.replayed_catalog_changes,
                "replayed_calls_per_sec": c.replayed_calls_per_sec(),
                "replay_threads": c.replay_threads,
                "replay_barriers": c.replay_barriers,
            })
        });
        let v = serde_json::json!({
            "silor": silor_json,
            "command": command_json,
            "partitions": r.partitions, "segments": r.segments, "records": r.records,
            "log_bytes": r.log_bytes, "torn_tails": r.torn_tails, "winners": r.winners,
            "losers": r.losers, "pages_redone": r.pages_redone, "records_redone": r.records_redone,
            "records_undone": r.records_undone, "undo_groups": r.undo_groups, "gaps": r.gaps,
            "committed_beyond_gap": r.committed_beyond_gap, "repaired_torn_pages": r.repaired_torn_pages,
            "redo_decided_serially": r.redo_decided_serially,
            "image_load_seconds": r.image_load.as_secs_f64(), "image_bytes": r.image_bytes,
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
        if r.image_bytes > 0 {
            println!(
                "  load     {:>10.3} ms   {} bytes of checkpoint or snapshot",
                r.image_load.as_secs_f64() * 1e3,
                r.image_bytes
            );
        }
        println!("  analysis {:>10.3} ms", r.analysis.as_secs_f64() * 1e3);
        println!(
            "  redo     {:>10.3} ms   {} records on {} pages, {} gaps{}",
            r.redo.as_secs_f64() * 1e3,
            r.records_redone,
            r.pages_redone,
            r.gaps,
            if r.redo_decided_serially {
                " (decided serially: a structure modification could not be redone)"
            } else {
                ""
            }
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
        if let Some(s) = &silor {
            println!(
                "  silor checkpoint load {:>10.3} ms   {} rows, {} bytes, {:.3} GB/s",
                s.checkpoint_load.as_secs_f64() * 1e3,
                s.checkpoint_load_rows,
                s.checkpoint_load_bytes,
                s.checkpoint_load_gb_per_sec()
            );
            println!(
                "  silor log replay      {:>10.3} ms   {} entries ({} beyond pepoch, {} below the checkpoint), {} bytes, {:.3} GB/s",
                s.log_replay.as_secs_f64() * 1e3,
                s.recovered_entries,
                s.skipped_entries,
                s.below_checkpoint_entries,
                s.recovered_bytes,
                s.log_replay_gb_per_sec()
            );
        }
        if let Some(c) = &command {
            println!(
                "  command snapshot load {:>10.3} ms   {} rows, {} bytes, up to call {}",
                c.snapshot_load.as_secs_f64() * 1e3,
                c.snapshot_load_rows,
                c.snapshot_load_bytes,
                c.snapshot_base_sequence
            );
            println!(
                "  command replay        {:>10.3} ms   {} calls, {} catalog changes, {:.0} calls/s on {} thread(s), {} barriers ({} log records before the snapshot skipped; log read {:.3} ms)",
                c.replay.as_secs_f64() * 1e3,
                c.replayed_calls,
                c.replayed_catalog_changes,
                c.replayed_calls_per_sec(),
                c.replay_threads,
                c.replay_barriers,
                c.records_below_snapshot,
                c.log_read.as_secs_f64() * 1e3
            );
        }
    }
    db.close()?;
    Ok(())
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line: clap's first line, without its usage block.
            let msg = e.to_string();
            let mut lines = msg.lines();
            let mut first = lines.next().unwrap_or("bad arguments").to_string();
            // "the following required arguments were not provided:" names
            // them on the indented lines after it.
            if first.ends_with(':') {
                let named: Vec<&str> = lines
                    .take_while(|l| l.starts_with(' '))
                    .map(str::trim)
                    .collect();
                first = format!("{first} {}", named.join(", "));
            }
            eprintln!("{} (see --help)", first);
            std::process::exit(2);
        }
    };
    // The engine's warnings (a log disk too small for the WAL limit, a
    // file system without O_DIRECT, a torn page restored, a pool full of
    // pages kept in memory) reach the user on stderr; `WAYPOINT_LOG`
    // (`info`, `waypoint=debug`, `off`, ...) changes the level. The
    // simulator sets up its own: its seeds inject faults on purpose.
    if !matches!(cli.command, Command::Simulate(_)) {
        let filter = tracing_subscriber::EnvFilter::try_from_env("WAYPOINT_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_target(false)
            .try_init();
    }
    let result = match cli.command {
        Command::Bench(args) => bench(*args),
        Command::Compare(args) => compare::run(args),
        Command::Check { dir, scheme } => check(dir, scheme.as_deref()),
        Command::Recover {
            dir,
            json,
            buffer,
            threads,
            scheme,
        } => recover(dir, json, &buffer, threads, scheme.as_deref()),
        Command::Simulate(args) => simulate::run(args),
        Command::Verify(args) => tools::verify(args),
        Command::Inspect(args) => tools::inspect(args),
        Command::CrashTest(args) => crash_test::run(args),
        Command::CrashChild(args) => crash_child::child(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
