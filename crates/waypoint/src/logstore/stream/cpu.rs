//! How busy the process keeps the machine's cores: the share of the
//! cores' time its threads used over the last tenth of a second or so.
//! A stream's writer asks before it ends a pacing pause early for a
//! waiting request's patience (decision 034): a sync costs CPU (on a VM
//! the host charges its I/O to the guest's vCPUs), which is free while
//! cores idle and taken from the workers while they are all busy.

use std::time::{Duration, Instant};

/// Samples closer together than this say little: the previous share
/// stands until the next sample.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

pub(super) struct CpuShare {
    cores: f64,
    at: Instant,
    cpu: Duration,
    /// Process CPU time over wall time times the cores, smoothed.
    share: f64,
}

impl CpuShare {
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        CpuShare {
            cores: cores as f64,
            at: Instant::now(),
            cpu: process_cpu(),
            share: 0.0,
        }
    }

    /// The current share (0: idle, 1: every core busy with this process),
    /// sampled again if the last sample is old enough.
    pub fn now(&mut self) -> f64 {
        let elapsed = self.at.elapsed();
        if elapsed >= SAMPLE_EVERY {
            let cpu = process_cpu();
            let used = cpu.saturating_sub(self.cpu).as_secs_f64();
            let sample = used / (elapsed.as_secs_f64() * self.cores);
            self.share = (self.share + sample) / 2.0;
            self.at = Instant::now();
            self.cpu = cpu;
        }
        self.share
    }
}

/// CPU time used by every thread of this process so far.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a
    // constant every Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_shows_as_a_share_of_the_cores() {
        let mut share = CpuShare::new();
        let until = Instant::now() + SAMPLE_EVERY * 3;
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spun = share.now();
        // One core of `cores`, halved by the smoothing, and loosely: other
        // tests and processes may take some of its time.
        assert!(spun > 0.25 / share.cores, "one spinning thread showed {spun}");
        assert!(spun <= 1.05, "a share of the cores, not {spun}");
    }
}
