//! The machine a comparison ran on, as `/proc` tells it (CPU model,
//! cores, memory, kernel, the file system holding the data), and the date, so that every report states
//! where and when its numbers were taken (DESIGN.md, "Measuring").

use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    /// Logical CPUs the kernel lists.
    pub cpus: usize,
    /// CPUs this process may run on.
    pub cores_available: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    /// The file system the runs' data directories were on.
    pub disk: String,
}

impl Machine {
    /// This machine, with the data directories below `data`.
    pub fn this(data: &Path) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                matches!(k.trim(), "model name" | "Model" | "cpu model")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let cpus = cpuinfo
            .lines()
            .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
            .count();
        Machine {
            cpu,
            cpus,
            cores_available: cores(),
            memory_bytes: memory_bytes(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            disk: disk_of(data),
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        format!(
            "{}, {} logical CPUs ({} available to this process), {:.1} GiB of memory, Linux {}; data on {}",
            self.cpu,
            self.cpus,
            self.cores_available,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.kernel,
            self.disk
        )
    }
}

/// The file system holding `path`, from the longest mount point above
/// it in `/proc/self/mounts`: "ext4 on /dev/vda1 (mounted at /)".
pub fn disk_of(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (device, at, kind) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(at).then_some((at.len(), device, at, kind))
        })
        .max_by_key(|m| m.0)
        .map_or_else(
            || "an unknown file system".into(),
            |(_, device, at, kind)| format!("{kind} on {device} (mounted at {at})"),
        )
}

/// CPUs this process may run on (1 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `MemTotal` in bytes, 0 if unknown.
pub fn memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// The current time as "YYYY-MM-DD HH:MM UTC".
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// `secs` since the Unix epoch as "YYYY-MM-DD HH:MM UTC" (the civil
/// calendar from days, Howard Hinnant's `civil_from_days`).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (hour, minute) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        // 2000-02-29 (a leap day of a century leap year) 12:34.
        assert_eq!(utc(951_827_640), "2000-02-29 12:34 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13 UTC");
    }

    #[test]
    fn this_machine_has_a_cpu_and_memory() {
        let m = Machine::this(Path::new("/"));
        assert!(m.cores_available >= 1);
        assert!(m.describe().contains("logical CPUs"));
        assert!(m.disk.contains("mounted at /"), "{}", m.disk);
    }
}
