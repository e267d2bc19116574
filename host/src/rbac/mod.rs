//! `reconcile-host rbac`: the ClusterRole, Roles and bindings that plugin manifests need, as
//! YAML for `kubectl apply -f -`.
//!
//! # What each plugin needs
//! - `get`, `list`, `watch` on its `for`, `owns` and `cache` kinds: the host's informers list
//!   and watch them, in the plugin's `namespace` (a Role there) or in every namespace (the
//!   ClusterRole). RBAC cannot narrow by label, so a `labelSelector` changes nothing.
//! - Per grant, its verbs, in its `namespaces` (a Role in each) or everywhere (the ClusterRole),
//!   on the kind and on each of its `subresources` (`<plural>/<subresource>`). `patch` also
//!   brings `create` on the kind: server-side apply of an object that does not exist yet creates
//!   it, and the API server authorizes that as `create` as well as `patch` (a grant's `patch`
//!   allows applies, so the host needs both).
//! - `create` of `events.k8s.io` Events, where it watches: the host records a plugin's events
//!   with one `create` each (it never patches or lists them).
//!
//! A plugin that acts as a ServiceAccount (`serviceAccountName`) splits these: the host keeps
//! the reads (its informers), the account gets the reads too (its cached reads are answered
//! only where it may get and list), its Events and its grants, in a ClusterRole and Roles
//! named `<name>-<namespace>-<account>` bound to it; and the host gets `impersonate` on exactly
//! those accounts (a Role per namespace with `resourceNames`) and `create` on
//! `subjectaccessreviews` (`<name>-impersonation`, `<name>-read-reviews`).
//!
//! Rules of plugins that share a kind and place are merged; a namespace's rules already given
//! cluster-wide are left out. The host's own Lease is not a plugin's need: it is added only with
//! `--include-host`, with the reviews the secured telemetry port makes and the ClusterRole a
//! scraper of `/metrics` is bound to (`telemetry`).
//!
//! # Resource names
//! A rule names the kind's resource (its plural). Without `--discover` it is derived from the
//! kind as kube-rs and client-go derive it (`Ingress` → `ingresses`, `NetworkPolicy` →
//! `networkpolicies`), which is right for every built-in kind; for custom resources it is a
//! guess that the output's header lists, to be checked against the CRD's `spec.names.plural`,
//! fixed with `--plural Kind.group=plural`, or replaced by asking the API server (`--discover`,
//! which connects as `run` does). A grant's written `resource` is taken as its kind's plural.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kube::core::GroupVersionKind;

use crate::cluster_config::{ClusterSource, cluster_config};
use crate::delivery::loader::manifest_paths;
use crate::exit::EXIT_CONFIG;
use crate::manifest::{Manifest, ModuleSource, ServiceAccountRef};
use crate::runtime::KindRef;
use label_selector::{is_dns_label, is_dns_subdomain};

mod impersonation;
mod rules;
mod telemetry;

use k8s_openapi::api::rbac::v1::PolicyRule;
pub use rules::{
    Place, Plural, Rules, derived_plural, lease_rules, membership_lease_rules, render,
};
use rules::{cluster_role, group, plugin_object_rules, role};

/// Flags of `rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Plugin manifests, or directories of `<name>/plugin.yaml` manifests (as `run --plugin`).
    #[arg(required = true, value_name = "MANIFEST|DIR")]
    pub paths: Vec<PathBuf>,
    /// The service account the host runs as, which the bindings name.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        default_value = "reconcile-system/reconcile-host",
        value_parser = service_account
    )]
    pub service_account: (String, String),
    /// Name of the ClusterRole, Roles and bindings (the host's Lease Role adds
    /// `-leader-election`).
    #[arg(
        long = "name",
        value_name = "PREFIX",
        default_value = "reconcile-host-plugins",
        value_parser = object_name
    )]
    pub name: String,
    /// The resource of a kind whose plural is not derived from its name, e.g.
    /// `--plural Octopus.example.com=octopi` (`Kind=plural` for the core group); repeat.
    #[arg(long = "plural", value_name = "KIND.GROUP=PLURAL", value_parser = plural)]
    pub plurals: Vec<(String, String, String)>,
    /// Ask the API server for every kind's resource name instead of deriving it; connects as
    /// `run` does (--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long)]
    pub discover: bool,
    /// With --discover: the kubeconfig.
    #[arg(long, value_name = "FILE", requires = "discover")]
    pub kubeconfig: Option<PathBuf>,
    /// With --discover: the kubeconfig context.
    #[arg(long, requires = "discover")]
    pub context: Option<String>,
    /// With --discover in a pod: the service account directory.
    #[arg(long, value_name = "DIR", requires = "discover")]
    pub service_account_dir: Option<PathBuf>,
    /// Also the host's own rules: a Role for its Lease (`get`, `update` of --lease-name,
    /// `create` of Leases) in --lease-namespace.
    #[arg(long)]
    pub include_host: bool,
    /// With --include-host: the Lease's name.
    #[arg(long, default_value = "reconcile-host", requires = "include_host")]
    pub lease_name: String,
    /// With --include-host: the Lease's namespace [default: the service account's].
    #[arg(long, requires = "include_host")]
    pub lease_namespace: Option<String>,
    /// With --include-host: the rules of `--election-mode`: `leader` (one Lease, by name) or
    /// `sharded` (each replica's membership Lease: `create`, `get`, `list`, `update`,
    /// `delete` of Leases in the namespace, as their names hold the replicas' identities).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "leader",
        requires = "include_host"
    )]
    pub election_mode: crate::config::ElectionMode,
    /// Let the host act as its plugins' ServiceAccounts through constrained impersonation
    /// (Kubernetes 1.36+): `impersonate:serviceaccount` on exactly those accounts, and
    /// `impersonate-on:serviceaccount:<verb>` only for what each account's plugins may do,
    /// instead of plain `impersonate`.
    #[arg(long)]
    pub constrained_impersonation: bool,
}

fn service_account(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name)) if is_dns_label(namespace) && is_dns_subdomain(name) => {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!(
            "`{text}` is not NAMESPACE/NAME of a service account, e.g. \
             reconcile-system/reconcile-host"
        )),
    }
}

fn object_name(text: &str) -> Result<String, String> {
    if is_dns_subdomain(text) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a valid name; use lowercase letters, digits, `-` and `.`"
        ))
    }
}

fn plural(text: &str) -> Result<(String, String, String), String> {
    let bad = || {
        format!(
            "`{text}` is not KIND.GROUP=PLURAL; write e.g. Octopus.example.com=octopi, or \
             Kind=plural for the core group"
        )
    };
    let (kind_group, plural) = text.split_once('=').ok_or_else(bad)?;
    let (kind, group) = kind_group.split_once('.').unwrap_or((kind_group, ""));
    let kind_ok = kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric());
    if !kind_ok || !(group.is_empty() || is_dns_subdomain(group)) || !is_dns_subdomain(plural) {
        return Err(bad());
    }
    Ok((kind.to_owned(), group.to_owned(), plural.to_owned()))
}
/// `rbac`: prints the YAML; exit code 2 (with the reason on stderr) when a manifest or path
/// is unusable or discovery fails.
pub async fn rbac(args: RbacArgs) -> ExitCode {
    match generate(&args).await {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// The whole output of `rbac` for `args`.
///
/// # Errors
/// The message to print: a path that does not exist, a manifest's own error, a discovery
/// failure.
pub async fn generate(args: &RbacArgs) -> Result<String, String> {
    let mut paths = Vec::new();
    for path in &args.paths {
        let found =
            manifest_paths(std::slice::from_ref(path)).map_err(|error| error.to_string())?;
        if found.is_empty() {
            return Err(format!(
                "no plugin manifests in {}: a directory is read as `<name>/plugin.yaml` files; \
                 give the manifest file itself, or the directory above the plugins' directories",
                path.display()
            ));
        }
        paths.extend(found);
    }
    let mut manifests = Vec::new();
    let mut sources = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let manifest = if Manifest::is_object(&text) {
            let (manifest, source) =
                Manifest::load_object(path).map_err(|error| crate::error_chain(&error))?;
            sources.push(source);
            manifest
        } else {
            Manifest::load(path).map_err(|error| crate::error_chain(&error))?
        };
        manifests.push((path.clone(), manifest));
    }
    let mut plurals: BTreeMap<KindRef, Plural> = BTreeMap::new();
    for (_, manifest) in &manifests {
        let grants = manifest.grants.iter().map(|grant| &grant.kind);
        let kinds = std::iter::once(&manifest.for_kind).chain(&manifest.owns);
        for kind in kinds.chain(&manifest.cache).chain(grants) {
            plurals
                .entry(kind.clone())
                .or_insert_with(|| derived_plural(kind));
        }
    }
    // A grant's written `resource` is the plural (the host refuses calls when it is not).
    for grant in manifests.iter().flat_map(|(_, manifest)| &manifest.grants) {
        if let Some(resource) = &grant.resource {
            plurals.insert(
                grant.kind.clone(),
                Plural {
                    plural: resource.clone(),
                    guessed: false,
                },
            );
        }
    }
    for (kind, group_name, plural) in &args.plurals {
        let mut matched = false;
        for (known, found) in &mut plurals {
            if known.kind == *kind && group(known) == group_name {
                *found = Plural {
                    plural: plural.clone(),
                    guessed: false,
                };
                matched = true;
            }
        }
        if !matched {
            return Err(format!(
                "--plural {kind}{}{group_name}={plural} names a kind no manifest uses; check \
                 the kind's spelling and group",
                if group_name.is_empty() { "" } else { "." }
            ));
        }
    }
    if args.discover {
        discover(args, &mut plurals).await?;
    }
    let mut rules = Rules::default();
    let mut accounts: BTreeMap<ServiceAccountRef, Rules> = BTreeMap::new();
    for (_, manifest) in &manifests {
        let plural = |kind: &KindRef| plurals[kind].plural.clone();
        match &manifest.service_account {
            None => rules.add_manifest(manifest, &plural),
            // The host caches for it; the account reads, writes and records Events.
            Some(account) => {
                rules.add_reads(manifest, &plural);
                let own = accounts.entry(account.clone()).or_default();
                own.add_manifest(manifest, &plural);
            }
        }
    }
    rules.prune();
    let mut out = header(args, &manifests, &plurals);
    let mut documents = render(&rules, &args.name, &args.service_account);
    for (account, mut own) in accounts.clone() {
        own.prune();
        let name = format!("{}-{}-{}", args.name, account.namespace, account.name);
        let subject = (account.namespace.clone(), account.name.clone());
        documents.extend(render(&own, &name, &subject));
    }
    documents.extend(impersonation::documents(
        &args.name,
        &accounts,
        &args.service_account,
        args.constrained_impersonation,
    ));
    if args.include_host {
        documents.extend(host_documents(args));
        documents.extend(cluster_identity_documents(args));
        documents.extend(telemetry::documents(&args.name, &args.service_account));
        if !sources.is_empty() {
            documents.extend(plugin_object_documents(args, &sources));
        }
    }
    for document in documents {
        out.push_str("---\n");
        out.push_str(&document);
    }
    Ok(out)
}

/// The Role and RoleBinding of the host's Lease, in --lease-namespace or the service
/// account's namespace.
fn host_documents(args: &RbacArgs) -> [String; 2] {
    let namespace = args
        .lease_namespace
        .as_deref()
        .unwrap_or(&args.service_account.0);
    let name = format!("{}-leader-election", args.name);
    let rules = Some(match args.election_mode {
        crate::config::ElectionMode::Leader => lease_rules(&args.lease_name),
        crate::config::ElectionMode::Sharded => membership_lease_rules(),
    });
    role(&name, namespace, rules, &args.service_account)
}

/// The ClusterRole to read namespace `kube-system`, whose uid tells the host that the API
/// server came back with another store (see `informer::cluster_state`).
fn cluster_identity_documents(args: &RbacArgs) -> [String; 2] {
    let rule = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".to_owned()]),
        resource_names: Some(vec![crate::informer::cluster_state::WITNESS.to_owned()]),
        verbs: vec!["get".to_owned()],
        ..PolicyRule::default()
    };
    let name = format!("{}-cluster-identity", args.name);
    cluster_role(&name, vec![rule], &args.service_account)
}

/// What a host loading ReconcilerPlugin objects needs: a ClusterRole to read them and write
/// their status, and in each namespace of a ConfigMap module source, a Role to get those
/// ConfigMaps.
fn plugin_object_documents(args: &RbacArgs, sources: &[ModuleSource]) -> Vec<String> {
    let name = format!("{}-objects", args.name);
    let mut documents = cluster_role(&name, plugin_object_rules(), &args.service_account).to_vec();
    let mut config_maps: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for source in sources {
        if let ModuleSource::ConfigMap {
            namespace, name, ..
        } = source
        {
            config_maps.entry(namespace).or_default().push(name.clone());
        }
    }
    for (namespace, mut names) in config_maps {
        names.sort();
        names.dedup();
        let rule = PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_owned()]),
            resource_names: Some(names),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        };
        let role_name = format!("{}-modules", args.name);
        documents.extend(role(
            &role_name,
            namespace,
            Some(vec![rule]),
            &args.service_account,
        ));
    }
    documents
}

/// Replaces every plural with the API server's.
async fn discover(args: &RbacArgs, plurals: &mut BTreeMap<KindRef, Plural>) -> Result<(), String> {
    let source = ClusterSource {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        service_account_dir: args.service_account_dir.clone(),
    };
    let found = cluster_config(&source)
        .await
        .map_err(|error| crate::error_chain(&error))?;
    let url = found.config.cluster_url.to_string();
    let client = crate::client::client(found.config, &crate::client::ClientLimits::default())
        .map_err(|error| crate::error_chain(&error))?;
    for (kind, plural) in plurals.iter_mut() {
        let version = kind
            .api_version
            .rsplit_once('/')
            .map_or(kind.api_version.as_str(), |(_, version)| version);
        let gvk = GroupVersionKind::gvk(group(kind), version, &kind.kind);
        let (resource, _) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .map_err(|error| {
                format!(
                    "--discover: the API server at {url} does not tell the resource of {kind} \
                     ({error}); install its CRD first, or drop --discover and pass --plural"
                )
            })?;
        *plural = Plural {
            plural: resource.plural,
            guessed: false,
        };
    }
    Ok(())
}

/// The comment block that opens the output: sources, subject, guesses, what is left out.
fn header(
    args: &RbacArgs,
    manifests: &[(PathBuf, Manifest)],
    plurals: &BTreeMap<KindRef, Plural>,
) -> String {
    let mut out = String::from(
        "# RBAC for reconcile-host plugins, from `reconcile-host rbac`; apply with \
         `kubectl apply -f -`.\n# Manifests:\n",
    );
    for (path, manifest) in manifests {
        let _ = writeln!(out, "#   {} (plugin `{}`)", path.display(), manifest.name);
    }
    let (namespace, name) = &args.service_account;
    let _ = writeln!(out, "# Bound to the service account {namespace}/{name}.");
    let guessed: Vec<String> = plurals
        .iter()
        .filter(|(_, plural)| plural.guessed)
        .map(|(kind, plural)| format!("{} {} -> {}", kind.api_version, kind.kind, plural.plural))
        .collect();
    if !guessed.is_empty() {
        let _ = writeln!(
            out,
            "# Resource names derived from the kind (check them against the CRDs' \
             spec.names.plural, or pass --plural or --discover): {}.",
            guessed.join(", ")
        );
    }
    if args.include_host {
        let _ = writeln!(
            out,
            "# Includes the host's own rules (--include-host): Role {0}-leader-election (its \
             Lease), ClusterRole {0}-cluster-identity (get namespace kube-system), ClusterRole \
             {0}-telemetry-reviews (token and access reviews of the secured telemetry port), \
             ClusterRole {0}-metrics-reader (get /metrics; bind it to your scraper), ClusterRole \
             {0}-debug-reader and Role {0}-debug-proxy (what `kubectl reconcile` needs; bind \
             both to its users), ClusterRole {0}-recording-reader (get /debug/recordings, for \
             `kubectl reconcile replay`).",
            args.name
        );
    } else {
        out.push_str(
            "# Not included: the host's own Lease (get, update, create of \
             coordination.k8s.io leases); pass --include-host to add it.\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn manifest(text: &str) -> Manifest {
        let base = "name: p\nmodule: p.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n";
        Manifest::parse(&format!("{base}{text}"), Path::new("/tmp")).expect("manifest")
    }

    fn rules_of(manifests: &[Manifest]) -> Rules {
        let mut rules = Rules::default();
        for manifest in manifests {
            rules.add_manifest(manifest, &|kind| derived_plural(kind).plural);
        }
        rules.prune();
        rules
    }

    fn verbs(rules: &Rules, place: &Place, group: &str, resource: &str) -> Vec<&'static str> {
        rules.0[place][&(group.to_owned(), resource.to_owned())]
            .iter()
            .copied()
            .collect()
    }

    #[test]
    fn plurals_of_built_in_kinds_are_derived_and_custom_ones_flagged_as_guesses() {
        for (api_version, kind, plural, guessed) in [
            ("v1", "Endpoints", "endpoints", false),
            ("networking.k8s.io/v1", "Ingress", "ingresses", false),
            (
                "networking.k8s.io/v1",
                "NetworkPolicy",
                "networkpolicies",
                false,
            ),
            ("apps/v1", "Deployment", "deployments", false),
            ("example.com/v1", "Website", "websites", true),
            ("cluster.x-k8s.io/v1beta1", "Machine", "machines", true),
        ] {
            let found = derived_plural(&KindRef::new(api_version, kind));
            assert_eq!(
                (found.plural.as_str(), found.guessed),
                (plural, guessed),
                "{api_version} {kind}"
            );
        }
    }

    #[test]
    fn apply_needs_create_on_the_object_but_not_on_its_subresources() {
        let rules = rules_of(&[manifest(
            "grants: [{apiVersion: apps/v1, kind: Deployment, verbs: [patch], \
             subresources: [status]}]\n",
        )]);
        let cluster = Place::Cluster;
        assert_eq!(
            verbs(&rules, &cluster, "apps", "deployments"),
            ["create", "patch"]
        );
        assert_eq!(
            verbs(&rules, &cluster, "apps", "deployments/status"),
            ["patch"]
        );
    }

    #[test]
    fn namespace_rules_given_cluster_wide_are_left_out() {
        let rules = rules_of(&[
            manifest(
                "grants: [{apiVersion: v1, kind: Secret, verbs: [get, delete], namespaces: [a]}]\n",
            ),
            manifest("grants: [{apiVersion: v1, kind: Secret, verbs: [get]}]\n"),
        ]);
        assert_eq!(verbs(&rules, &Place::Cluster, "", "secrets"), ["get"]);
        assert_eq!(
            verbs(&rules, &Place::Namespace("a".into()), "", "secrets"),
            ["delete"]
        );
        // Both watch ConfigMaps everywhere, so `a` gets nothing else.
        assert_eq!(rules.0[&Place::Namespace("a".into())].len(), 1);
    }

    #[test]
    fn a_namespaced_plugin_watches_and_records_events_in_its_namespace_only() {
        let rules = rules_of(&[manifest("namespace: team\n")]);
        assert!(!rules.0.contains_key(&Place::Cluster));
        let team = Place::Namespace("team".into());
        assert_eq!(
            verbs(&rules, &team, "", "configmaps"),
            ["get", "list", "watch"]
        );
        assert_eq!(verbs(&rules, &team, "events.k8s.io", "events"), ["create"]);
    }

    #[test]
    fn flags_are_checked() {
        assert_eq!(
            plural("Octopus.sea.example.com=octopi"),
            Ok(("Octopus".into(), "sea.example.com".into(), "octopi".into()))
        );
        assert_eq!(
            plural("Endpoints=endpoints"),
            Ok(("Endpoints".into(), String::new(), "endpoints".into()))
        );
        for bad in ["Octopus", "Octo pus.x.com=o", "Octopus.x.com=Octopi", "=x"] {
            assert!(plural(bad).is_err(), "{bad}");
        }
        assert_eq!(
            service_account("ops/host"),
            Ok(("ops".into(), "host".into()))
        );
        assert!(service_account("host").is_err());
        assert!(object_name("Tools").is_err());
    }
}
