//! Readiness: named checks that components register, aggregated for `/readyz` the way
//! Kubernetes' `?verbose` output prints them.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use super::error::TelemetryError;

type Probe = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

struct Check {
    name: Arc<str>,
    probe: Probe,
}

/// The readiness checks of one process; a cheap clonable handle.
///
/// Components register a check by name — `cache/v1/ConfigMap` once its informer has synced,
/// `leader-election` once the elector runs — and the process is ready when every check passes.
/// Checks are evaluated on every [`readiness`](Health::readiness) call, in registration order,
/// and stay until [`remove_check`](Health::remove_check): a component that fails must leave its
/// check failing, not vanish; one that is removed on purpose (an unloaded plugin's cache)
/// removes it.
#[derive(Clone, Default)]
pub struct Health {
    checks: Arc<Mutex<Vec<Check>>>,
}

impl fmt::Debug for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let checks = self.checks.lock();
        f.debug_list()
            .entries(checks.iter().map(|check| &check.name))
            .finish()
    }
}

impl Health {
    /// No checks: ready.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `probe` as the check `name`: `Ok(())` passes, `Err(reason)` fails with
    /// `reason`. The probe runs on every readiness request, so it must be quick and must not
    /// block (read a flag or a watch channel, don't call the API server).
    ///
    /// # Errors
    /// [`TelemetryError::InvalidCheckName`] if `name` is empty or holds whitespace;
    /// [`TelemetryError::DuplicateCheck`] if a check of that name exists.
    pub fn add_check(
        &self,
        name: &str,
        probe: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<(), TelemetryError> {
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(TelemetryError::InvalidCheckName {
                name: name.to_owned(),
            });
        }
        let mut checks = self.checks.lock();
        if checks.iter().any(|check| &*check.name == name) {
            return Err(TelemetryError::DuplicateCheck {
                name: name.to_owned(),
            });
        }
        checks.push(Check {
            name: name.into(),
            probe: Arc::new(probe),
        });
        Ok(())
    }

    /// Removes the check `name`; true if there was one.
    pub fn remove_check(&self, name: &str) -> bool {
        let mut checks = self.checks.lock();
        let before = checks.len();
        checks.retain(|check| &*check.name != name);
        checks.len() != before
    }

    /// Registers the check `name` as a gate the component opens and closes itself. It starts
    /// closed, failing with "not ready yet".
    ///
    /// # Errors
    /// As [`add_check`](Health::add_check).
    pub fn gate(&self, name: &str) -> Result<ReadinessGate, TelemetryError> {
        let gate = ReadinessGate {
            state: Arc::new(Mutex::new(Err("not ready yet".to_owned()))),
        };
        let state = Arc::clone(&gate.state);
        self.add_check(name, move || state.lock().clone())?;
        Ok(gate)
    }

    /// Runs every check now.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        // Copy the probes out so no probe runs under the lock (a probe may register a check).
        let checks: Vec<(Arc<str>, Probe)> = self
            .checks
            .lock()
            .iter()
            .map(|check| (Arc::clone(&check.name), Arc::clone(&check.probe)))
            .collect();
        Readiness {
            checks: checks
                .into_iter()
                .map(|(name, probe)| CheckResult {
                    name,
                    result: probe(),
                })
                .collect(),
        }
    }
}

/// A check the component sets directly; see [`Health::gate`]. Clones share one state.
#[derive(Clone, Debug)]
pub struct ReadinessGate {
    state: Arc<Mutex<Result<(), String>>>,
}

impl ReadinessGate {
    /// The check passes from now on.
    pub fn set_ready(&self) {
        *self.state.lock() = Ok(());
    }

    /// The check fails with `reason` from now on.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        *self.state.lock() = Err(reason.into());
    }
}

/// The outcome of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    /// The check's name.
    pub name: Arc<str>,
    /// `Ok(())` when it passed, else why it failed.
    pub result: Result<(), String>,
}

/// Every check's outcome at one moment. Displays as Kubernetes' verbose health output:
///
/// ```text
/// [+]cache/v1/ConfigMap ok
/// [-]leader-election failed: not ready yet
/// readyz check failed
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// The checks in registration order.
    pub checks: Vec<CheckResult>,
}

impl Readiness {
    /// True when every check passed (and when there are none).
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.checks.iter().all(|check| check.result.is_ok())
    }
}

impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            match &check.result {
                Ok(()) => writeln!(f, "[+]{} ok", check.name)?,
                // One line per check: a multi-line reason would read as further checks.
                Err(reason) => writeln!(
                    f,
                    "[-]{} failed: {}",
                    check.name,
                    reason.replace(['\r', '\n'], " ")
                )?,
            }
        }
        let verdict = if self.is_ready() { "passed" } else { "failed" };
        writeln!(f, "readyz check {verdict}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn readiness_fails_until_every_check_passes() {
        let health = Health::new();
        let cache = health.gate("cache/v1/ConfigMap").expect("unique name");
        let leader = health.gate("leader-election").expect("unique name");
        assert!(!health.readiness().is_ready());
        cache.set_ready();
        assert!(
            !health.readiness().is_ready(),
            "leader-election still fails"
        );
        leader.set_ready();
        assert!(health.readiness().is_ready());
        cache.set_not_ready("watch lost; relisting");
        assert!(!health.readiness().is_ready(), "a gate can close again");
    }

    #[test]
    fn readiness_body_lists_every_check_with_its_reason_in_registration_order() {
        let health = Health::new();
        let cache = health.gate("cache/v1/ConfigMap").expect("unique name");
        let _leader = health.gate("leader-election").expect("unique name");
        cache.set_ready();
        assert_eq!(
            health.readiness().to_string(),
            "[+]cache/v1/ConfigMap ok\n\
             [-]leader-election failed: not ready yet\n\
             readyz check failed\n"
        );
    }

    #[test]
    fn passing_readiness_still_prints_each_check() {
        let health = Health::new();
        health.add_check("ping", || Ok(())).expect("unique name");
        let readiness = health.readiness();
        assert!(readiness.is_ready());
        assert_eq!(readiness.to_string(), "[+]ping ok\nreadyz check passed\n");
    }

    #[test]
    fn a_process_without_checks_is_ready() {
        let readiness = Health::new().readiness();
        assert!(readiness.is_ready());
        assert_eq!(readiness.to_string(), "readyz check passed\n");
    }

    #[test]
    fn probes_are_evaluated_on_every_request() {
        let health = Health::new();
        let synced = Arc::new(AtomicBool::new(false));
        health
            .add_check("cache/v1/Secret", {
                let synced = Arc::clone(&synced);
                move || {
                    if synced.load(Ordering::SeqCst) {
                        Ok(())
                    } else {
                        Err("initial list not in the cache".to_owned())
                    }
                }
            })
            .expect("unique name");
        assert_eq!(
            health.readiness().checks[0].result,
            Err("initial list not in the cache".to_owned())
        );
        synced.store(true, Ordering::SeqCst);
        assert_eq!(health.readiness().checks[0].result, Ok(()));
    }

    #[test]
    fn a_multi_line_reason_prints_on_one_line() {
        let health = Health::new();
        let gate = health.gate("x").expect("unique name");
        gate.set_not_ready("first\nsecond");
        assert_eq!(
            health.readiness().to_string(),
            "[-]x failed: first second\nreadyz check failed\n"
        );
    }

    #[test]
    fn duplicate_and_malformed_check_names_are_rejected() {
        let health = Health::new();
        let _gate = health.gate("leader-election").expect("unique name");
        assert!(matches!(
            health.gate("leader-election"),
            Err(TelemetryError::DuplicateCheck { name }) if name == "leader-election"
        ));
        for name in ["", "two words", "line\nbreak"] {
            assert!(
                matches!(
                    health.add_check(name, || Ok(())),
                    Err(TelemetryError::InvalidCheckName { .. })
                ),
                "{name:?} accepted"
            );
        }
        assert_eq!(health.readiness().checks.len(), 1);
    }
}
