//! Instructions per transaction (seed 000 Table 1's second column) with
//! `perf stat`, where it can count them: `perf stat -p PID -- sleep S`
//! counts this process, every thread, for S seconds of a run's measured
//! window. Virtual machines often expose no hardware counters (`perf`
//! then prints `<not supported>`); the report says so instead of a
//! number.

use std::process::{Child, Command, Stdio};

/// The event `perf stat` counts.
const EVENTS: [&str; 2] = ["instructions", "instructions:u"];

/// Whether `perf stat` counts instructions here: Ok(the event that
/// works), or Err(why not, one line for the report).
pub fn probe() -> Result<&'static str, String> {
    let mut last = String::new();
    for event in EVENTS {
        let out = Command::new("perf")
            .args(["stat", "-x,", "-e", event, "--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .output();
        let out = match out {
            Ok(o) => o,
            Err(e) => return Err(format!("`perf` cannot be run ({e})")),
        };
        let text = String::from_utf8_lossy(&out.stderr);
        if parse(&text, event).is_some() {
            return Ok(event);
        }
        // "<not supported>,,instructions,..." on machines without the
        // counter; otherwise perf's last words.
        last = text
            .lines()
            .find(|l| l.contains("instructions"))
            .and_then(|l| l.split(',').next())
            .or_else(|| text.lines().last())
            .unwrap_or("no output")
            .trim()
            .to_string();
    }
    Err(format!(
        "`perf stat -e instructions` counts nothing here (it prints `{last}`)"
    ))
}

/// The count of `event` in `perf stat -x,` output, if it counted.
pub fn parse(text: &str, event: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut fields = l.split(',');
        let value = fields.next()?.trim();
        let _unit = fields.next()?;
        (fields.next()?.trim() == event)
            .then(|| value.parse().ok())
            .flatten()
    })
}

/// A `perf stat` counting this process for a fixed time.
pub struct Counter {
    child: Child,
    event: &'static str,
}

impl Counter {
    /// Count `event` in this process for `secs` seconds, from now.
    pub fn start(event: &'static str, secs: f64) -> Option<Counter> {
        let child = Command::new("perf")
            .args(["stat", "-x,", "-e", event, "-p"])
            .arg(std::process::id().to_string())
            .args(["--", "sleep"])
            .arg(format!("{:.3}", secs.max(0.001)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        Some(Counter { child, event })
    }

    /// Wait for the count; None if perf failed.
    pub fn finish(self) -> Option<u64> {
        let out = self.child.wait_with_output().ok()?;
        parse(&String::from_utf8_lossy(&out.stderr), self.event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_stat_csv_lines() {
        assert_eq!(
            parse("123456789,,instructions,2000000,100.00,,\n", "instructions"),
            Some(123_456_789)
        );
        assert_eq!(
            parse(
                "<not supported>,,instructions:u,0,100.00,,\n",
                "instructions:u"
            ),
            None
        );
        assert_eq!(parse("5,,cycles,1,100.00,,\n", "instructions"), None);
    }
}
