//! Leader election settings, their validation, and the replica's identity.

use std::time::Duration;

/// client-go's jitter factor: acquire retries wait `retry_period * (1 + rand * 1.2)`, and the
/// renew deadline must exceed `1.2 * retry_period`.
pub const JITTER_FACTOR: f64 = 1.2;

/// How a replica campaigns for and holds the Lease (SEMANTICS rule 18).
#[derive(Clone, Debug, PartialEq)]
pub struct ElectionConfig {
    /// This replica's unique identity, written into the Lease's `holderIdentity`.
    pub identity: String,
    /// How long followers wait, from the last change they observed, before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
    /// Whether the leader clears the Lease when it stops, so a peer can take over at once.
    pub release_on_cancel: bool,
}

impl Default for ElectionConfig {
    /// client-go's defaults (15 s / 10 s / 2 s, release on cancel) with a fresh identity.
    fn default() -> Self {
        Self {
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

/// Settings that cannot give a safe election.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// A duration is zero.
    #[error("leader election: {0} must be greater than zero")]
    Zero(&'static str),
    /// The lease would expire before the leader gives up renewing, so two leaders could overlap.
    #[error(
        "leader election: lease duration ({lease:?}) must be greater than the renew deadline \
         ({renew:?}); raise the lease duration or lower the renew deadline"
    )]
    LeaseNotLongerThanRenew {
        /// The lease duration given.
        lease: Duration,
        /// The renew deadline given.
        renew: Duration,
    },
    /// The leader could give up before a single jittered retry could run.
    #[error(
        "leader election: renew deadline ({renew:?}) must be greater than {JITTER_FACTOR} × the \
         retry period ({retry:?}); lower the retry period or raise the renew deadline"
    )]
    RenewNotLongerThanRetry {
        /// The renew deadline given.
        renew: Duration,
        /// The retry period given.
        retry: Duration,
    },
    /// The identity is empty.
    #[error("leader election: identity must not be empty")]
    EmptyIdentity,
}

impl ElectionConfig {
    /// Checks the settings as client-go does.
    ///
    /// # Errors
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, value) in [
            ("lease duration", self.lease_duration),
            ("renew deadline", self.renew_deadline),
            ("retry period", self.retry_period),
        ] {
            if value.is_zero() {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenew {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(ConfigError::RenewNotLongerThanRetry {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        if self.identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        Ok(())
    }
}

/// `hostname_<random>`: the pod name in a cluster, made unique per process.
#[must_use]
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let suffix: String = (0..8)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rand::random_range(0..36)]))
        .collect();
    format!("{host}_{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn defaults_are_client_go_defaults_and_valid() {
        let config = ElectionConfig::default();
        assert_eq!(
            (
                config.lease_duration,
                config.renew_deadline,
                config.retry_period
            ),
            (secs(15), secs(10), secs(2))
        );
        assert!(config.release_on_cancel);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn settings_that_could_overlap_leaders_are_refused() {
        let base = ElectionConfig::default();
        let lease_too_short = ElectionConfig {
            lease_duration: secs(10),
            ..base.clone()
        };
        assert!(matches!(
            lease_too_short.validate(),
            Err(ConfigError::LeaseNotLongerThanRenew { .. })
        ));
        let retry_too_long = ElectionConfig {
            retry_period: Duration::from_millis(8_400),
            ..base.clone()
        };
        assert!(matches!(
            retry_too_long.validate(),
            Err(ConfigError::RenewNotLongerThanRetry { .. })
        ));
        let zero = ElectionConfig {
            retry_period: Duration::ZERO,
            ..base.clone()
        };
        assert_eq!(zero.validate(), Err(ConfigError::Zero("retry period")));
        let anonymous = ElectionConfig {
            identity: String::new(),
            ..base
        };
        assert_eq!(anonymous.validate(), Err(ConfigError::EmptyIdentity));
    }

    #[test]
    fn identities_are_hostname_underscore_random_and_unique() {
        let (a, b) = (default_identity(), default_identity());
        assert_ne!(a, b);
        let (host, suffix) = a.rsplit_once('_').expect("hostname_random");
        assert!(!host.is_empty());
        assert_eq!(suffix.len(), 8);
        assert!(suffix.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
