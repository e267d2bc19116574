//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry)
//! on a free loopback port, with filesystem storage in a directory of the test's own and
//! optional htpasswd auth; stopped on drop (its own process group), restartable on the same
//! port and storage.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a registry may take to answer `/v2/`.
const READY: Duration = Duration::from_secs(20);

/// The registry binary the test-dependency script installs.
const BINARY: &str = "docker-registry";

/// A running (or stopped) registry process.
pub struct Registry {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Registry {
    /// Starts a registry storing under `dir` (created), without auth.
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, None)
    }

    /// Starts a registry storing under `dir`; with `user`, it requires that user and password
    /// (htpasswd, bcrypt).
    pub fn start_with(dir: &Path, user: Option<(&str, &str)>) -> Self {
        std::fs::create_dir_all(dir.join("storage")).expect("registry storage dir");
        let auth = match user {
            Some((name, password)) => {
                let hash = bcrypt::hash(password, 4).expect("bcrypt hash");
                let htpasswd = dir.join("htpasswd");
                std::fs::write(&htpasswd, format!("{name}:{hash}\n")).expect("htpasswd written");
                format!(
                    "auth:\n  htpasswd:\n    realm: test-registry\n    path: {}\n",
                    htpasswd.display()
                )
            }
            None => String::new(),
        };
        for attempt in 0..5 {
            let port = super::host::free_port();
            let config = format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: false\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                 http:\n  addr: 127.0.0.1:{port}\n{auth}",
                dir.join("storage").display()
            );
            std::fs::write(dir.join("config.yml"), config).expect("registry config written");
            let mut registry = Self {
                dir: dir.to_owned(),
                port,
                child: None,
            };
            match registry.try_up() {
                Ok(()) => return registry,
                Err(why) if why.contains("address already in use") && attempt < 4 => {}
                Err(why) => panic!("docker-registry did not start: {why}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// `127.0.0.1:<port>`, as written in references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The registry's storage directory (blobs under `docker/registry/v2/blobs`).
    pub fn storage(&self) -> PathBuf {
        self.dir.join("storage")
    }

    /// The registry's log (stdout and stderr): its access log lists every request.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
    }

    /// Stops the process (the storage stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
    }

    /// Starts it again on the same port and storage.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(why) = self.try_up() {
            panic!("docker-registry did not start again: {why}");
        }
    }

    fn try_up(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("registry.log"))
            .expect("registry log opens");
        let mut child = Command::new(BINARY)
            .arg("serve")
            .arg(self.dir.join("config.yml"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {BINARY} ({e}); run scripts/install-test-deps.sh")
            });
        let deadline = Instant::now() + READY;
        loop {
            if answers(self.port) {
                self.child = Some(child);
                return Ok(());
            }
            if let Some(status) = child.try_wait().ok().flatten() {
                return Err(format!("exited ({status}): {}", self.log()));
            }
            if Instant::now() >= deadline {
                stop(&mut child);
                return Err(format!("no answer on /v2/ after {READY:?}: {}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `GET /v2/` gets an HTTP answer (200, or 401 when auth is on).
fn answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request =
        format!("GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok()
        && (head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.1 401"))
}

/// TERM to the process group, then KILL after a bounded wait.
fn stop(child: &mut Child) {
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
