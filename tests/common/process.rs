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
