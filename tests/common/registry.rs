//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry)
//! on a free loopback port, with filesystem storage in a directory of the test's own and
//! optional htpasswd auth or TLS (a CA of the test's own); stopped on drop (its own process group), restartable on the same
//! port and storage.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::watchdog;

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

    /// Starts a registry storing under `dir` that serves HTTPS with a certificate for
    /// `127.0.0.1` signed by a CA of its own, whose PEM file is [`ca_file`](Self::ca_file).
    pub fn start_tls(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("registry dir");
        let (ca, cert, key) = certificates();
        std::fs::write(dir.join("ca.pem"), ca).expect("CA written");
        std::fs::write(dir.join("cert.pem"), cert).expect("certificate written");
        std::fs::write(dir.join("key.pem"), key).expect("key written");
        let tls = format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("cert.pem").display(),
            dir.join("key.pem").display()
        );
        Self::launch(dir, &tls, None)
    }

    /// The PEM file of the CA that signed a [`start_tls`](Self::start_tls) registry's
    /// certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Starts a registry storing under `dir`; with `user`, it requires that user and password
    /// (htpasswd, bcrypt).
    pub fn start_with(dir: &Path, user: Option<(&str, &str)>) -> Self {
        Self::launch(dir, "", user)
    }

    fn launch(dir: &Path, tls: &str, user: Option<(&str, &str)>) -> Self {
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
                 http:\n  addr: 127.0.0.1:{port}\n{tls}{auth}",
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

    /// Writes a host configuration into `dir` that loads plugin objects and reaches this
    /// registry over plain HTTP, the pulled modules kept in `dir`; its path, as an argument.
    pub fn host_config(&self, dir: &Path) -> String {
        let config = dir.join("host.yaml");
        std::fs::write(
            &config,
            format!(
                "pluginObjects: true\noci:\n  insecureRegistries: [\"{}\"]\n  cacheDir: {}\n",
                self.host(),
                dir.join("oci-cache").display()
            ),
        )
        .expect("config written");
        config.display().to_string()
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
            watchdog::stop(&mut child);
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
        let mut child = watchdog::spawn(
            Command::new(BINARY)
                .arg("serve")
                .arg(self.dir.join("config.yml"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log handle"))
                .stderr(log),
        )
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
                watchdog::forget(child.id());
                return Err(format!("exited ({status}): {}", self.log()));
            }
            if Instant::now() >= deadline {
                watchdog::stop(&mut child);
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

/// A CA, and a certificate for `127.0.0.1` it signed with its key: three PEM texts.
fn certificates() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "test registry CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("leaf params");
    let key = KeyPair::generate().expect("leaf key");
    let leaf = params.signed_by(&key, &ca).expect("leaf certificate");
    (ca.pem(), leaf.pem(), key.serialize_pem())
}

/// Whether `GET /v2/` gets an HTTP answer (200, or 401 when auth is on; over TLS, the 400 a Go
/// server gives plain HTTP).
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
        && (head.starts_with(b"HTTP/1.1 200")
            || head.starts_with(b"HTTP/1.1 401")
            || head.starts_with(b"HTTP/1.0 400"))
}
