//! `waypoint bench tpcc|tpcb|ycsb|voter`: builds the driver's and the workload's
//! configuration from the options, prints one line per second and the
//! summary table, and writes `summary.json`, `series.csv` and the PNG plots
//! to `--out` (a plot that fails is a warning line on stderr).

use crate::args::BenchArgs;
use anyhow::{bail, Context, Result};
use waypoint_bench::driver::{self, DriverConfig};
use waypoint_bench::metrics::Sample;
use waypoint_bench::tpcb::{Tpcb, TpcbConfig};
use waypoint_bench::tpcc::{Tpcc, TpccConfig};
use waypoint_bench::voter::{Voter, VoterConfig};
use waypoint_bench::workload::Workload;
use waypoint_bench::ycsb::{KeyDistribution, Ycsb, YcsbConfig};

pub(crate) fn driver_config(args: &BenchArgs) -> Result<DriverConfig> {
    let d = DriverConfig::default();
    let scheme = args.scheme()?;
    Ok(DriverConfig {
        dir: args.dir.clone(),
        out: args.out.clone(),
        workers: args.workers(),
        duration_secs: args.duration(),
        warmup_secs: args.warmup.unwrap_or(d.warmup_secs),
        max_txns: args.txns,
        rate: args.rate,
        in_flight: args
            .in_flight
            .unwrap_or_else(|| DriverConfig::default_in_flight(scheme)),
        buffer_bytes: args.buffer_bytes()?,
        page_size: args.page_size_bytes()?,
        scheme,
        commit: args.commit()?,
        checkpoint: args.checkpoint()?,
        wal_limit_bytes: args.wal_limit_bytes()? as u64,
        sync_interval_us: args.sync_interval_us(),
        segment_bytes: args.segment_bytes()?,
        wal_preallocate: args.wal_preallocate(),
        wal_zero_fill: args.wal_zero_fill(),
        checkpoint_shards: args.checkpoint_shards.unwrap_or(d.checkpoint_shards),
        checkpoint_threads: args.checkpoint_threads.unwrap_or(d.checkpoint_threads),
        silor: args.silor_options()?,
        command_snapshot: args.command_snapshot()?,
        executors: args.command_executors()?,
        recovery_threads: args.recovery_threads.unwrap_or(d.recovery_threads),
        wal_archive: args.wal_archive.clone(),
        direct_io: args.direct_io,
        log_direct_io: args.log_direct_io(),
        seed: args.seed.unwrap_or(d.seed),
        verify: true,
        pin: args.pin(),
        interrupt: None,
    })
}

fn tpcb(args: &BenchArgs) -> Result<Tpcb> {
    if args.scale == Some(0) {
        bail!("--scale must be positive");
    }
    let scale = args.scale.unwrap_or(10);
    let config = match args.records {
        Some(r) => TpcbConfig::with_accounts(scale, r),
        None => TpcbConfig::with_scale(scale),
    };
    Ok(Tpcb::new(config))
}

/// TPC-C at the spec's sizes; one warehouse per worker unless
/// `--warehouses` says otherwise.
fn tpcc(args: &BenchArgs, seed: u64) -> Result<Tpcc> {
    if args.records.is_some() || args.scale.is_some() {
        bail!("--records and --scale do not apply to tpcc; its size is --warehouses");
    }
    let warehouses = args.warehouses.unwrap_or(args.workers() as u32);
    if warehouses == 0 || warehouses > u16::MAX as u32 {
        bail!("--warehouses must be between 1 and {}", u16::MAX);
    }
    let config = TpccConfig {
        scale_down: args.tpcc_scale_down.unwrap_or(1),
        ..TpccConfig::new(warehouses)
    };
    // Under `command` the calls are the only writes; the report says so.
    let procedures = args.procedures || args.scheme()? == waypoint::SchemeKind::Command;
    let tpcc = Tpcc::new(config, seed).with_procedures(procedures);
    Ok(match (args.no_remote, args.multi_partition) {
        (true, _) => tpcc.without_remote(),
        (false, Some(pct)) => tpcc.multi_partition(pct),
        (false, None) => tpcc,
    })
}

fn ycsb(args: &BenchArgs) -> Result<Ycsb> {
    let preset = args.preset.as_deref().unwrap_or("a");
    let mut chars = preset.chars();
    let (Some(p), None) = (chars.next(), chars.next()) else {
        bail!("unknown --preset {preset:?}; available: a, b, c, d, e, f");
    };
    let mut config = YcsbConfig::preset(p, args.records.unwrap_or(1_000_000))?;
    if let Some(d) = &args.distribution {
        config.distribution = KeyDistribution::parse(d).with_context(|| {
            format!("unknown --distribution {d:?}; available: uniform, zipfian, latest")
        })?;
    }
    config.theta = args.theta.unwrap_or(config.theta);
    config.value_size = args.value_size.unwrap_or(config.value_size);
    config.ops_per_txn = args.ops_per_txn.unwrap_or(config.ops_per_txn);
    Ok(Ycsb::new(config))
}

pub(crate) fn voter(args: &BenchArgs) -> Result<Voter> {
    let d = VoterConfig::default();
    let config = VoterConfig {
        contestants: args.contestants.unwrap_or(d.contestants),
        max_votes_per_phone: args.max_votes.unwrap_or(d.max_votes_per_phone),
        phones: args.records.unwrap_or(d.phones),
        ..d
    };
    config.check()?;
    Ok(Voter::new(config))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn print_second(types: &[&str], s: &Sample) {
    let by_type = if types.len() > 1 {
        let parts: Vec<String> = types
            .iter()
            .zip(&s.txn_by_type)
            .map(|(t, n)| format!("{t} {:.0}", *n as f64 / s.interval_secs.max(1e-9)))
            .collect();
        format!(" ({})", parts.join(", "))
    } else {
        String::new()
    };
    println!(
        "  {:>4} s{} {:>9.0} txn/s{by_type}  aborts {:>5}  log {:>7.1} MiB/s, {:>8.1} MiB on disk  rss {:>7.1} MiB",
        s.second,
        if s.warmup { " warm-up" } else { "        " },
        s.txn_per_sec(),
        s.aborts,
        mib(s.wal_bytes) / s.interval_secs.max(1e-9),
        mib(s.wal_disk_bytes),
        mib(s.rss_bytes),
    );
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if args.updates_per_txn.is_some() {
        bail!("--updates-per-txn applies to the `updates` workload only");
    }
    if args.disjoint {
        bail!("--disjoint applies to the `updates` workload only");
    }
    let config = driver_config(args)?;
    if let Some(dir) = &config.dir {
        driver::check_dir(dir)?;
    }
    let mut workload: Box<dyn Workload> = match args.workload.as_str() {
        "tpcc" => Box::new(tpcc(args, config.seed)?),
        "tpcb" => Box::new(tpcb(args)?),
        "ycsb" => Box::new(ycsb(args)?),
        "voter" => Box::new(voter(args)?),
        other => unreachable!("dispatched {other}"),
    };
    workload
        .validate(config.page_size)
        .map_err(|e| crate::args::name_flag(e, crate::args::BENCH_FLAGS))?;
    // `silor` has its own options: loggers, trigger, checkpointers.
    let log_options = if config.scheme == waypoint::SchemeKind::Silor {
        let s = &config.silor;
        format!(
            "{} loggers, checkpoint {} by {} threads",
            s.loggers,
            s.checkpoint.name(),
            s.checkpointers
        )
    } else {
        format!(
            "commit {}, checkpoint {}, WAL limit {:.0} MiB",
            args.commit_name(),
            config.checkpoint.name(),
            mib(config.wal_limit_bytes)
        )
    };
    println!(
        "waypoint bench {}: {}; {} workers, {} in flight each{}, {} s + {} s warm-up, buffer {}, page {}, scheme {}, {}, pin {}, dir {}",
        workload.name(),
        workload.config_json(),
        config.workers,
        config.in_flight,
        config
            .rate
            .map_or(String::new(), |r| format!(", offered {r} txn/s")),
        config.duration_secs,
        config.warmup_secs,
        args.buffer_name(),
        args.page_size_name(),
        args.scheme_name(),
        log_options,
        driver::pin_name(config.pin),
        config
            .dir
            .as_ref()
            .map_or("(temporary)".to_string(), |d| d.display().to_string()),
    );
    let types = workload.txn_types();
    let progress = |s: &Sample| print_second(&types, s);
    let out = driver::run(&config, workload.as_mut(), &progress).context("benchmark failed")?;
    println!();
    print!("{}", out.summary.table());
    if let Some(dir) = &config.out {
        let mut files = vec![dir.join("summary.json"), dir.join("series.csv")];
        files.extend(out.plots.iter().cloned());
        let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        println!("wrote {}", files.join(", "));
    }
    for w in &out.warnings {
        eprintln!("{w}");
    }
    Ok(())
}
