//! The end-to-end tests, one binary: each module checks one behaviour of the whole system — the
//! real `reconcile-host` binary, compiled components, an API server (embedded, or a real
//! kube-apiserver with `E2E_BACKEND=real`), kubectl. One binary links the host once and shares one
//! control plane; `cargo test -p end-to-end --test e2e <module>::` runs one module. Each module
//! opens with what it checks.

mod common;

mod api_request_logs;
mod author_tools;
mod check_sample;
mod command_line;
mod deployment;
mod dev_mode;
mod example_plugins;
mod guest_isolation;
mod hot_reload;
mod in_cluster;
mod lang_c;
mod lang_go;
mod lang_javascript;
mod lang_python;
mod leader_fencing;
mod monitoring;
mod namespaced_plugins;
mod new_plugin;
mod oci_registry;
mod plugin_admission;
mod plugin_fetches;
mod plugin_objects;
mod rbac_enforced;
mod read_authorization;
mod reconcile_logs;
mod reconcile_traces;
mod reconcile_why;
mod record_replay;
mod replica_faults;
mod replicator_safety;
mod safe_upgrades;
mod scale_out;
mod startup;
mod state_loss;
mod tenancy;
mod tenant_shares;
