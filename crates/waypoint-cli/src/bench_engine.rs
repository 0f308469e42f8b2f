//! `waypoint bench engine` (load, point reads, range scans, clean close,
//! verified reopen) and `waypoint bench updates` (the commit path under
//! each commit protocol): the benchmarks that came before the driver.

use crate::args::BenchArgs;
use anyhow::{bail, Context, Result};
use waypoint_bench::engine::{self, EngineConfig};

fn write_summary(args: &BenchArgs, json: String) -> Result<()> {
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let path = out.join("summary.json");
        std::fs::write(&path, json).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn check_fresh_dir(args: &BenchArgs) -> Result<()> {
    if let Some(dir) = &args.dir {
        if dir.join(waypoint::DATA_FILE).exists() {
            bail!(
                "{} already holds a database; the {} benchmark needs an empty directory",
                dir.display(),
                args.workload
            );
        }
    }
    Ok(())
}

pub fn engine(args: &BenchArgs) -> Result<()> {
    check_fresh_dir(args)?;
    let config = EngineConfig {
        scheme: args.scheme()?,
        commit: args.commit()?,
        scheme_name: args.scheme_name().to_string(),
        commit_name: args.commit_name().to_string(),
        dir: args.dir.clone(),
        workers: args.workers(),
        records: args.records.unwrap_or(1_000_000),
        value_size: args.value_size.unwrap_or(100),
        buffer_bytes: args.buffer_bytes()?,
        page_size: args.page_size_bytes()?,
        duration_secs: args.duration(),
        seed: args.seed.unwrap_or(42),
        ..EngineConfig::default()
    };
    config
        .validate()
        .map_err(|e| crate::args::name_flag(e, crate::args::BENCH_FLAGS))?;
    let data_mib = config.records as f64 * (8 + config.value_size) as f64 / (1 << 20) as f64;
    println!(
        "waypoint bench engine: {} records of {} bytes (~{data_mib:.0} MiB), buffer {}, page {}, {} workers, {} s per timed phase, scheme {}, commit {}",
        config.records, config.value_size, args.buffer_name(), args.page_size_name(), config.workers, config.duration_secs, args.scheme_name(), args.commit_name()
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
    println!("binary: waypoint {}", report.build);
    write_summary(args, serde_json::to_string_pretty(&report)?)
}

pub fn updates(args: &BenchArgs) -> Result<()> {
    check_fresh_dir(args)?;
    let config = waypoint_bench::updates::UpdatesConfig {
        dir: args.dir.clone(),
        workers: args.workers(),
        records: args.records.unwrap_or(1_000_000),
        value_size: args.value_size.unwrap_or(100),
        updates_per_txn: args.updates_per_txn.unwrap_or(4),
        disjoint: args.disjoint,
        pipeline: args.in_flight.unwrap_or(1),
        duration_secs: args.duration(),
        scheme: args.scheme()?,
        commit: args.commit()?,
        commit_name: args.commit_name().to_string(),
        sync_interval_us: args.sync_interval_us(),
        wal_preallocate: args.wal_preallocate(),
        wal_zero_fill: args.wal_zero_fill(),
        seed: args.seed.unwrap_or(42),
    };
    config
        .validate()
        .map_err(|e| crate::args::name_flag(e, crate::args::BENCH_FLAGS))?;
    println!(
        "waypoint bench updates: {} records of {} bytes{}, {} updates per transaction, {} workers, {} in flight per worker, scheme {}, commit {}, {} s",
        config.records, config.value_size, if config.disjoint { " (a disjoint share per worker)" } else { "" }, config.updates_per_txn, config.workers, config.pipeline, args.scheme_name(), args.commit_name(), config.duration_secs
    );
    let r = waypoint_bench::updates::run(&config).context("benchmark failed")?;
    println!(
        "raw 4 KiB write + fdatasync in the same directory: p50 {} µs, p99 {} µs appended; p50 {} µs, p99 {} µs into a preallocated file",
        r.fdatasync_us.p50, r.fdatasync_us.p99, r.fdatasync_preallocated_us.p50, r.fdatasync_preallocated_us.p99
    );
    print!(
        "{}",
        waypoint_bench::report::format_table(std::slice::from_ref(&r.run))
    );
    println!(
        "commit latency until durable / fdatasync p50: {:.2}x appended, {:.2}x preallocated; log {:.0} bytes per transaction, {} fdatasyncs, remote-flush fraction {:.3}",
        r.run.latency_us.p50 as f64 / r.fdatasync_us.p50.max(1) as f64,
        r.run.latency_us.p50 as f64 / r.fdatasync_preallocated_us.p50.max(1) as f64,
        r.log_bytes_per_txn,
        r.log_syncs,
        r.remote_flush_fraction
    );
    println!("binary: waypoint {}", r.build);
    write_summary(args, serde_json::to_string_pretty(&r)?)
}
