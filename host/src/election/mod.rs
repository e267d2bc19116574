//! Lease-based leader election (SEMANTICS §6): one replica dispatches reconciles, the others
//! stand by warm.
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> anyhow::Result<()> {
//! use reconcile_host::election::{ElectionConfig, KubeLease, LeaderElector, Leadership};
//! use tokio_util::sync::CancellationToken;
//!
//! let lock = KubeLease::new(client, "kube-system", "reconcile-host");
//! let elector = LeaderElector::new(lock, ElectionConfig::default())?;
//! let mut leadership = elector.subscribe();
//! let shutdown = CancellationToken::new();
//! tokio::spawn(elector.run(shutdown.clone()));
//! loop {
//!     leadership.changed().await?;
//!     if let Leadership::Leading { term } = &*leadership.borrow() {
//!         // start workers; stop them when `term` is cancelled
//!     }
//! }
//! # }
//! ```

mod config;
mod elector;
mod fence;
mod lock;
#[cfg(test)]
mod memory;
#[cfg(test)]
mod tests;

pub use config::{ConfigError, ElectionConfig, JITTER_FACTOR, default_identity};
pub use elector::{ElectionError, LeaderElector, Leadership};
pub use fence::{Fence, Term};
pub use lock::{KubeLease, LeaseLock, LockError, Observed};
