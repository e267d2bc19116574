//! The exit codes of `reconcile-host`, shared by every subcommand.

/// Exit code for an unusable configuration (a bad flag, file, manifest or input).
pub const EXIT_CONFIG: u8 = 2;
/// Exit code when a second signal cuts the graceful shutdown short.
pub const EXIT_INTERRUPTED: u8 = 130;
