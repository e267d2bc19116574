//! An in-process, in-memory Kubernetes API server: the development cluster and the test backbone.
#![deny(missing_docs)]

mod auth;
mod builtins;
mod cel_rules;
mod cluster;
mod config;
mod create;
mod defaults;
mod delete;
pub mod error;
mod events;
pub mod faults;
pub mod field_selector;
mod gc;
mod generation;
mod http;
mod kind_rules;
mod metadata;
pub mod patch;
mod patching;
mod resources;
mod schema_check;
mod schema_rules;
mod schemas;
mod server;
mod store;
mod structural;
mod tls;
mod typed;
mod update;
mod util;
mod validation;

pub use config::Config;
pub use error::{ApiError, ClientError, StartError, WriteError};
pub use faults::{FailRule, Failure, Faults, Verb};
pub use http::RecordedRequest;
pub use server::ApiServer;
