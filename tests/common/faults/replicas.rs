//! The replicas of a fault run: real host processes, each an *incarnation* `r<slot>-<n>` (its
//! `HOSTNAME`, so its identity is `r<slot>-<n>_<random>`, and the witness guest's `REPLICA`),
//! each slot connecting through its own proxy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::backend::Backend;
use crate::common::host::{Host, component, manifest};

use super::checker::Mode;

/// Lease, renewal deadline and retry period.
#[derive(Clone, Copy, Debug)]
pub struct Durations {
    /// `--lease-duration`.
    pub lease: Duration,
    /// `--renew-deadline`.
    pub renew: Duration,
    /// `--retry-period`.
    pub retry: Duration,
}

impl Durations {
    /// The suite's: 2 s, 1.5 s, 250 ms.
    pub const SHORT: Self = Self {
        lease: Duration::from_secs(2),
        renew: Duration::from_millis(1500),
        retry: Duration::from_millis(250),
    };
    /// client-go's: 15 s, 10 s, 2 s.
    pub const DEFAULT: Self = Self {
        lease: Duration::from_secs(15),
        renew: Duration::from_secs(10),
        retry: Duration::from_secs(2),
    };
}

/// One running incarnation.
pub struct Replica {
    /// `r<slot>-<n>`.
    pub name: String,
    /// The process.
    pub host: Host,
    /// Stopped with SIGSTOP and not yet continued.
    pub frozen: bool,
}

/// The replicas of one run.
pub struct Replicas {
    dir: PathBuf,
    /// slot → the kubeconfig naming that slot's proxy.
    kubeconfigs: Vec<PathBuf>,
    namespace: String,
    mode: Mode,
    durations: Durations,
    /// The CPUs the replicas run on (`taskset -c` syntax), when pinned.
    cores: Option<String>,
    /// slot → the incarnation running in it.
    pub live: BTreeMap<usize, Replica>,
    /// Incarnations that ended, with their logs.
    pub ended: Vec<(String, Host)>,
    incarnations: BTreeMap<usize, u32>,
}

impl Replicas {
    /// No replicas yet; they will reconcile `namespace`'s ledger objects, with their Leases there,
    /// the replicas in slot `i` reaching the API server at `proxy_urls[i]` (one slot per URL).
    pub fn new(
        server: &Backend,
        dir: &Path,
        proxy_urls: &[String],
        namespace: &str,
        mode: Mode,
        durations: Durations,
        cores: Option<String>,
    ) -> Self {
        let direct = dir.join("server.kubeconfig");
        server.write_kubeconfig(&direct).expect("kubeconfig");
        let text = std::fs::read_to_string(&direct).expect("kubeconfig read");
        let kubeconfigs = proxy_urls
            .iter()
            .enumerate()
            .map(|(slot, url)| {
                let through = text.replace(&server.url(), url);
                assert!(
                    through.contains(url),
                    "the kubeconfig names {}",
                    server.url()
                );
                let path = dir.join(format!("slot-{slot}.kubeconfig"));
                std::fs::write(&path, through).expect("kubeconfig written");
                path
            })
            .collect();
        Self {
            dir: dir.to_owned(),
            kubeconfigs,
            namespace: namespace.to_owned(),
            mode,
            durations,
            cores,
            live: BTreeMap::new(),
            ended: Vec::new(),
            incarnations: BTreeMap::new(),
        }
    }

    /// Starts a new incarnation in `slot` (which must be empty and have a proxy).
    pub fn start(&mut self, slot: usize) {
        assert!(!self.live.contains_key(&slot), "slot {slot} is taken");
        assert!(slot < self.kubeconfigs.len(), "slot {slot} has no proxy");
        let count = self.incarnations.entry(slot).or_default();
        let name = format!("r{slot}-{count}");
        *count += 1;
        let dir = self.dir.join(&name);
        std::fs::create_dir_all(&dir).expect("replica dir");
        let env = format!("{{REPLICA: {name}, WITNESS: \"true\"}}");
        let grants = format!(
            "[{{apiVersion: v1, kind: ConfigMap, verbs: [get, patch], namespaces: [{}]}}]",
            self.namespace
        );
        let plugin = manifest(
            &dir,
            "host/tests/guests/ledger/plugin.yaml",
            &component("ledger"),
            &[("env", &env), ("grants", &grants)],
        );
        let mode = match self.mode {
            Mode::Leader => "leader",
            Mode::Sharded => "sharded",
        };
        // FAULT_HOST_BINARY: judge another build of the host (an older commit's, say).
        let mut command = match std::env::var_os("FAULT_HOST_BINARY") {
            Some(binary) => Host::command_of(Path::new(&binary)),
            None => Host::command(),
        };
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfigs[slot])
            .args(["--election-mode", mode])
            .args([
                "--lease-name",
                "faults",
                "--lease-namespace",
                &self.namespace,
            ])
            .arg("--lease-duration")
            .arg(format!("{}ms", self.durations.lease.as_millis()))
            .arg("--renew-deadline")
            .arg(format!("{}ms", self.durations.renew.as_millis()))
            .arg("--retry-period")
            .arg(format!("{}ms", self.durations.retry.as_millis()))
            .args(["--drain-timeout", "5s"])
            .arg("--plugin")
            .arg(plugin)
            .env("HOSTNAME", &name)
            .env("RUST_LOG", "info");
        if let Some(cores) = &self.cores {
            command = pinned(&command, cores);
            command.stdout(Stdio::null()).stderr(Stdio::piped());
        }
        let host = Host::spawn(command);
        self.live.insert(
            slot,
            Replica {
                name,
                host,
                frozen: false,
            },
        );
    }

    /// The slot `pick` chooses among the running ones that are not frozen; `None` if there is
    /// none.
    pub fn choose(&self, pick: u64) -> Option<usize> {
        let running: Vec<usize> = self
            .live
            .iter()
            .filter(|(_, r)| !r.frozen)
            .map(|(slot, _)| *slot)
            .collect();
        (!running.is_empty()).then(|| running[(pick % running.len() as u64) as usize])
    }

    /// A free slot, lowest first.
    pub fn free_slot(&self) -> usize {
        (0..)
            .find(|slot| !self.live.contains_key(slot))
            .unwrap_or(0)
    }

    /// SIGSTOP (`true`) or SIGCONT the replica in `slot`.
    pub fn freeze(&mut self, slot: usize, frozen: bool) {
        if let Some(replica) = self.live.get_mut(&slot) {
            replica
                .host
                .signal_if_running(if frozen { "STOP" } else { "CONT" });
            replica.frozen = frozen;
        }
    }

    /// Ends the replica in `slot`: SIGKILL, or SIGTERM and a wait for its exit (a graceful
    /// leave, killed if it takes longer than its drain allows).
    pub async fn end(&mut self, slot: usize, graceful: bool) {
        let Some(mut replica) = self.live.remove(&slot) else {
            return;
        };
        if replica.frozen {
            replica.host.signal_if_running("CONT");
        }
        if graceful {
            replica.host.signal_if_running("TERM");
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            while replica.host.running() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        replica.host.signal_if_running("KILL");
        self.ended.push((replica.name, replica.host));
    }

    /// The CPUs the replicas are pinned to, if they are.
    pub fn cores(&self) -> Option<&str> {
        self.cores.as_deref()
    }

    /// Every incarnation's log, by name.
    pub fn logs(&self) -> Vec<(String, String)> {
        self.live
            .values()
            .map(|r| (r.name.clone(), r.host.log()))
            .chain(
                self.ended
                    .iter()
                    .map(|(name, host)| (name.clone(), host.log())),
            )
            .collect()
    }
}

/// `command` run through `taskset -c <cores>` (the same program, arguments, environment and
/// directory, but not its standard streams: set them again), so the process and every thread
/// it starts run only on those CPUs.
pub fn pinned(command: &Command, cores: &str) -> Command {
    let mut wrapped = Command::new("taskset");
    wrapped
        .arg("-c")
        .arg(cores)
        .arg(command.get_program())
        .args(command.get_args());
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}
