//! Watchdogs: no process the harness starts outlives the test binary, also when the binary is
//! killed (SIGKILL, a timeout) and no `Drop` runs.
//!
//! A watchdog is a bash process, in a process group of its own, that reads process ids on its
//! stdin, one a line (`-<pid>` takes one off its list). When that pipe closes — its owner
//! finished it, or the test binary ended in any way — it stops the process group of each id
//! still listed, newest first: SIGTERM and SIGCONT (so a frozen process takes it too), SIGKILL
//! after 10 s. Then it removes its directory, if it was given one.
//!
//! A process the harness ends itself is taken off the list before it is reaped, so an id the
//! system hands out again is never signalled.
//!
//! [`spawn`] starts a process in its own group under the one watchdog all of this binary shares
//! (hosts, busy processes, the registry). The control plane has one of its own, which stops
//! kube-apiserver before etcd and removes the state directory.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

use parking_lot::Mutex;

use super::process::stop_group;

const SCRIPT: &str = r#"
pids=" "
while read -r line; do
  case $line in
    -*) pids="${pids/ ${line#-} / }" ;;
    *) pids=" $line$pids" ;;
  esac
done
for pid in $pids; do
  kill -TERM -- "-$pid" 2>/dev/null || continue
  kill -CONT -- "-$pid" 2>/dev/null
  i=0
  while kill -0 -- "-$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL -- "-$pid" 2>/dev/null
done
if [ -n "$1" ]; then rm -rf "$1"; fi
"#;

/// A bash process that stops the process groups on its list when its stdin closes.
pub struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Watchdog {
    /// A watchdog named `name` (its `$0`, as `ps` shows it) with an empty list; it removes
    /// `dir` at the end when given.
    pub fn start(name: &str, dir: Option<&Path>) -> Self {
        let mut command = Command::new("bash");
        command.args(["-c", SCRIPT, name]);
        if let Some(dir) = dir {
            command.arg(dir);
        }
        let mut child = command
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("bash runs");
        let stdin = child.stdin.take();
        Self { child, stdin }
    }

    /// Puts `pid` (which leads its own process group) on the list.
    pub fn watch(&mut self, pid: u32) {
        self.send(&pid.to_string())
            .expect("the watchdog reads its stdin");
    }

    /// Takes `pid` off the list (one entry, if it is there).
    pub fn forget(&mut self, pid: u32) {
        // A watchdog gone can stop nothing; there is nothing to take off.
        let _ = self.send(&format!("-{pid}"));
    }

    /// Takes `child` off the list and stops its process group (see [`stop_group`]).
    pub fn stop_group(&mut self, child: &mut Child) {
        self.forget(child.id());
        stop_group(child);
    }

    /// Closes the list: the watchdog stops whatever is still on it, removes its directory, and
    /// exits; this waits for that.
    pub fn finish(mut self) {
        self.stdin.take();
        let _ = self.child.wait();
    }

    fn send(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("the watchdog is not finished");
        writeln!(stdin, "{line}")
    }
}

/// The watchdog this test binary shares, started on first use; its stdin closes when the
/// binary exits.
fn shared() -> &'static Mutex<Watchdog> {
    static SHARED: OnceLock<Mutex<Watchdog>> = OnceLock::new();
    SHARED.get_or_init(|| Mutex::new(Watchdog::start("test-process-watchdog", None)))
}

/// Starts `command` in a process group of its own, on the shared watchdog's list.
pub fn spawn(command: &mut Command) -> std::io::Result<Child> {
    let child = command.process_group(0).spawn()?;
    shared().lock().watch(child.id());
    Ok(child)
}

/// Takes `pid` off the shared watchdog's list: call it before reaping a process [`spawn`]
/// started.
pub fn forget(pid: u32) {
    shared().lock().forget(pid);
}

/// Takes `child` (started by [`spawn`]) off the shared list, then kills and reaps it.
pub fn kill(child: &mut Child) {
    forget(child.id());
    let _ = child.kill();
    let _ = child.wait();
}

/// Takes `child` (started by [`spawn`]) off the shared list, then stops its process group
/// (see [`stop_group`]).
pub fn stop(child: &mut Child) {
    shared().lock().stop_group(child);
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// `sleep 600` leading a process group of its own, its output nowhere; killed when dropped,
    /// so a failing test leaves nothing behind.
    struct Sleeper(Child);

    impl Sleeper {
        fn start() -> Self {
            let child = Command::new("sleep")
                .arg("600")
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("sleep runs");
            Self(child)
        }

        fn id(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Reaps `sleepers` as they exit, for at most 5 s (the watchdog sees a group gone only once
    /// its parent, this process, has reaped it, and it stops one group at a time); whether all
    /// of them did.
    fn exit(sleepers: &mut [&mut Sleeper]) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut exited = vec![false; sleepers.len()];
        while Instant::now() < deadline {
            for (sleeper, exited) in sleepers.iter_mut().zip(&mut exited) {
                *exited = *exited || sleeper.0.try_wait().expect("wait").is_some();
            }
            if exited.iter().all(|e| *e) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn closing_the_list_stops_every_group_on_it_frozen_or_not_and_removes_the_directory() {
        let state = std::env::temp_dir().join(format!("watchdog-test-{}", std::process::id()));
        std::fs::create_dir_all(&state).expect("state directory");
        let mut watchdog = super::Watchdog::start("watchdog-test", Some(&state));
        let (mut running, mut frozen) = (Sleeper::start(), Sleeper::start());
        watchdog.watch(running.id());
        watchdog.watch(frozen.id());
        let stopped = Command::new("kill")
            .args(["-STOP", &frozen.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(stopped.success(), "SIGSTOP sent");

        let finished = std::thread::spawn(move || watchdog.finish());
        assert!(
            exit(&mut [&mut running, &mut frozen]),
            "the watchdog did not stop both processes, the running and the frozen one"
        );
        finished.join().expect("the watchdog finishes");
        assert!(!state.exists(), "the watchdog did not remove {state:?}");
    }

    #[test]
    fn a_process_taken_off_the_list_is_left_alone_and_each_entry_counts_once() {
        let mut watchdog = super::Watchdog::start("watchdog-test", None);
        let (mut kept, mut twice) = (Sleeper::start(), Sleeper::start());
        // Two entries of one id (a process id the system handed out again), apart: one forget
        // leaves the other.
        watchdog.watch(twice.id());
        watchdog.watch(kept.id());
        watchdog.watch(twice.id());
        watchdog.forget(twice.id());
        watchdog.forget(kept.id());

        let finished = std::thread::spawn(move || watchdog.finish());
        assert!(
            exit(&mut [&mut twice]),
            "the process still listed was not stopped"
        );
        finished.join().expect("the watchdog finishes");
        assert!(
            kept.0.try_wait().expect("wait").is_none(),
            "the watchdog stopped a process taken off its list"
        );
    }
}
