//! The `recording:` section of the host's configuration: which reconciles are recorded, how many
//! bundles each plugin keeps, where else they are written, whether Secret values stay, and
//! whether the telemetry port serves them.

use std::path::PathBuf;

use serde::Deserialize;

/// `recording:` settings: failures and keys asked for.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RecordingConfig {
    /// Bundles kept per plugin in memory (failures and requested keys), served on the telemetry
    /// port; 0 records nothing unless `directory` is set.
    pub keep: usize,
    /// Also write each bundle to this directory.
    pub directory: Option<PathBuf>,
    /// Keep the values of Secrets in bundles instead of replacing them by `redacted`.
    pub keep_secrets: bool,
    /// Serve each plugin's bundles (`GET /debug/recordings/<plugin>`) and take requests to
    /// record a key (`POST`) on the telemetry port. Off by default: the port has no
    /// authentication, and bundles hold what the plugin read.
    pub serve: bool,
}

impl Default for RecordingConfig {
    fn default() -> Self {
        Self {
            keep: 16,
            directory: None,
            keep_secrets: false,
            serve: false,
        }
    }
}
