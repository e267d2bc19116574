//! The embedded API server's integration tests, one binary: each module checks one behaviour over
//! HTTP or through a real client (kube-rs, kubectl, the Python client) and opens with what it
//! checks. `cargo test -p embedded-apiserver --test integration <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod authorization;
mod binary;
mod faults;
mod impersonation;
mod kube_rs;
mod kubectl;
mod kubectl_versions;
mod list_watch;
mod objects;
mod python_client;
mod upstream_answers;
