//! Child processes the harness starts in their own process groups (the control plane, the
//! registry), stopped with everything they started.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// SIGTERM to the process group of `child`, SIGKILL after 10 s.
pub fn stop_group(child: &mut Child) {
    if child.try_wait().ok().flatten().is_some() {
        return;
    }
    let group = format!("-{}", child.id());
    let _ = Command::new("kill")
        .args(["-TERM", "--", &group])
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-KILL", "--", &group])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
}

/// CPU time (user + system) of process `pid` so far, from `/proc/<pid>/stat` (100 Hz ticks);
/// zero once it is gone.
pub fn cpu_of(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces): utime and stime, fields 14 and 15 of
    // the line, are 11 and 12 after it.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| -> u64 { fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0) };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A `/proc/<pid>/status` figure in bytes (`VmRSS`, `VmHWM`); zero once the process is gone.
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix(field)?
                    .strip_prefix(':')?
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
        })
        .map_or(0, |kb| kb * 1024)
}
