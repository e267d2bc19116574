//! The running server: listeners (HTTP and HTTPS), background tasks, and the public handle with
//! URLs, kubeconfig, kube client, fault injection, bulk load and graceful shutdown.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::auth::authn::{Authenticator, DEFAULT_ADMIN_TOKEN};
use crate::cluster::{CRDS, Cluster, WriteOptions};
use crate::config::Config;
use crate::create::crd_status;
use crate::error::{ApiError, ClientError, StartError, WriteError};
use crate::faults::Faults;
use crate::http::{App, RecordedRequest, router};
use crate::resources::{Registry, crd_resources};
use crate::store::{ObjKey, Store};
use crate::util::{base64, new_uid, now_rfc3339};
use crate::{gc, tls};

/// Objects of one table for [`ApiServer::bulk_load`].
type Batch = (Arc<str>, Vec<(ObjKey, Value)>);

/// Objects stored per lock acquisition by [`ApiServer::bulk_load`].
const BULK_CHUNK: usize = 4096;

/// How long shutdown waits for open connections to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A running embedded API server. Dropping it without [`shutdown`](Self::shutdown) stops the
/// listeners and background tasks too, without waiting for connections.
///
/// # Flow
/// [`start`](Self::start) binds the listeners, creates the default namespaces and spawns the
/// accept loops and the garbage collector on the current tokio runtime.
///
/// # Guarantees
/// Every write gets a resourceVersion greater than every earlier one; watches see every change
/// of their resource in order, or end (clients then re-watch).
pub struct ApiServer {
    cluster: Arc<Cluster>,
    http_addr: SocketAddr,
    https_addr: Option<SocketAddr>,
    certs: tls::Certs,
    /// What [`restart_empty`](Self::restart_empty) starts again with.
    config: Box<Config>,
    /// The admin token (the required one, or the default the kubeconfig carries).
    token: String,
    requests: Option<Arc<std::sync::Mutex<Vec<RecordedRequest>>>>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl ApiServer {
    /// Starts a server with `config` on the current tokio runtime.
    ///
    /// # Errors
    /// [`StartError`] when a listener cannot bind or the certificate cannot be generated.
    pub async fn start(config: Config) -> Result<ApiServer, StartError> {
        Self::start_with(config, tls::generate()?).await
    }

    /// Stops this server and starts another on the same addresses, with the same serving
    /// certificate and token, over an empty store: what a kube-apiserver restarted on a wiped
    /// etcd looks like to its clients (every uid new, resourceVersions starting again, open
    /// watches ended).
    ///
    /// # Errors
    /// [`StartError`] when a listener cannot bind its address again.
    pub async fn restart_empty(self) -> Result<ApiServer, StartError> {
        let config = (*self.config)
            .clone()
            .http_addr(self.http_addr)
            .https_addr(self.https_addr);
        let certs = self.certs.clone();
        self.shutdown().await;
        Self::start_with(config, certs).await
    }

    async fn start_with(config: Config, certs: tls::Certs) -> Result<ApiServer, StartError> {
        // kube and this server both use rustls; pin the process default to ring when unset.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (store, removals) = Store::new(config.history_limit, config.watch_buffer);
        let store = Arc::new(store);
        let (gc_tx, gc_rx) = tokio::sync::mpsc::unbounded_channel();
        let cluster = Arc::new(Cluster {
            faults: Faults::new(store.clone()),
            store,
            registry: Arc::new(Registry::default()),
            config: config.clone(),
            gc: gc_tx,
        });
        let ns_res = cluster
            .registry
            .find("", "v1", "namespaces")
            .expect("namespaces are built in");
        let opts = WriteOptions {
            dry_run: false,
            field_manager: "embedded-apiserver".into(),
            applied: false,
        };
        for ns in &config.default_namespaces {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            cluster
                .create(&ns_res, "", obj, &opts)
                .expect("creating a default namespace in an empty store succeeds");
        }
        if config.authorization {
            for (plural, obj) in crate::auth::bootstrap::objects() {
                let res = cluster
                    .registry
                    .find("rbac.authorization.k8s.io", "v1", plural)
                    .expect("RBAC kinds are built in");
                cluster
                    .create(&res, "", obj, &opts)
                    .expect("creating a default RBAC object in an empty store succeeds");
            }
        }
        let cancel = CancellationToken::new();
        let requests = config.record_requests.then(Arc::default);
        let app = Arc::new(App {
            cluster: cluster.clone(),
            shutdown: cancel.clone(),
            auth: Arc::new(Authenticator::new(&config)),
            requests: requests.clone(),
        });
        let mut tasks = vec![tokio::spawn(gc::run(
            cluster.clone(),
            removals,
            gc_rx,
            cancel.clone(),
        ))];
        let bind = |addr: SocketAddr, which: &'static str| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::Bind {
                    which,
                    addr,
                    source,
                })
        };
        // Named ports before a port 0: the one the system picks cannot be one named here.
        let https = match config.https_addr {
            Some(addr) => {
                let listener = bind(addr, "HTTPS").await?;
                let bound = local_addr(&listener, addr, "HTTPS")?;
                Some((listener, bound))
            }
            None => None,
        };
        let http = bind(config.http_addr, "HTTP").await?;
        let http_addr = local_addr(&http, config.http_addr, "HTTP")?;
        tasks.push(tokio::spawn(serve(http, app.clone(), None, cancel.clone())));
        let https_addr = https.as_ref().map(|(_, bound)| *bound);
        if let Some((https, _)) = https {
            let acceptor = TlsAcceptor::from(certs.server_config.clone());
            tasks.push(tokio::spawn(serve(
                https,
                app,
                Some(acceptor),
                cancel.clone(),
            )));
        }
        tracing::info!(%http_addr, ?https_addr, "embedded API server listening");
        Ok(ApiServer {
            cluster,
            http_addr,
            https_addr,
            token: config
                .token
                .clone()
                .unwrap_or_else(|| DEFAULT_ADMIN_TOKEN.into()),
            certs,
            config: Box::new(config),
            requests,
            cancel,
            tasks,
        })
    }

    /// The plain HTTP base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// The HTTPS base URL, when the HTTPS listener is enabled.
    pub fn https_url(&self) -> Option<String> {
        self.https_addr.map(|a| format!("https://{a}"))
    }

    /// PEM of the CA that signed the HTTPS serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.certs.ca_pem
    }

    /// Writes the CA PEM to `path`.
    ///
    /// # Errors
    /// [`WriteError`] when the file cannot be written.
    pub fn write_ca(&self, path: &Path) -> Result<(), WriteError> {
        std::fs::write(path, &self.certs.ca_pem).map_err(|source| WriteError {
            what: "the CA certificate",
            path: path.to_path_buf(),
            source,
        })
    }

    /// The kubeconfig (YAML is a superset of JSON, so it is written as JSON) pointing at the
    /// HTTPS listener with the CA embedded, or at HTTP when HTTPS is disabled.
    pub fn kubeconfig(&self) -> String {
        let mut cluster = json!({"server": self.https_url().unwrap_or_else(|| self.url())});
        if self.https_addr.is_some() {
            cluster["certificate-authority-data"] = json!(base64(self.certs.ca_pem.as_bytes()));
        }
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "embedded", "cluster": cluster}],
            "users": [{"name": "embedded", "user": {"token": self.token}}],
            "contexts": [{"name": "embedded", "context": {"cluster": "embedded", "user": "embedded", "namespace": "default"}}],
            "current-context": "embedded",
        });
        serde_json::to_string_pretty(&config).unwrap_or_default()
    }

    /// Writes [`kubeconfig`](Self::kubeconfig) to `path`.
    ///
    /// # Errors
    /// [`WriteError`] when the file cannot be written.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), WriteError> {
        std::fs::write(path, self.kubeconfig()).map_err(|source| WriteError {
            what: "the kubeconfig",
            path: path.to_path_buf(),
            source,
        })
    }

    /// A kube client talking to the HTTP listener. Call it inside a tokio runtime (kube spawns
    /// its request buffer task).
    ///
    /// # Errors
    /// [`ClientError`] when kube refuses the configuration.
    pub fn kube_client(&self) -> Result<kube::Client, ClientError> {
        self.client_impersonating(None)
    }

    /// As [`kube_client`](Self::kube_client), impersonating `user` (`Impersonate-User`), as
    /// a controller acting for someone else does.
    ///
    /// # Errors
    /// [`ClientError`] when kube refuses the configuration.
    pub fn kube_client_as(&self, user: &str) -> Result<kube::Client, ClientError> {
        self.client_impersonating(Some(user))
    }

    fn client_impersonating(&self, user: Option<&str>) -> Result<kube::Client, ClientError> {
        let url = self.url();
        let uri = url
            .parse()
            .expect("an http URL built from a socket address parses");
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        config.auth_info.token = Some(self.token.clone().into());
        config.auth_info.impersonate = user.map(ToOwned::to_owned);
        kube::Client::try_from(config).map_err(|source| ClientError { url, source })
    }

    /// Every request received so far, in order, if the server records them
    /// ([`Config::record_requests`](crate::Config::record_requests)); empty otherwise.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests
            .as_ref()
            .map(|requests| {
                requests
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
            })
            .unwrap_or_default()
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> Faults {
        self.cluster.faults.clone()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.cluster.store.current_rv()
    }

    /// Number of stored objects and an estimate of the memory their storage takes, in bytes
    /// (serialized objects, keys and per-entry bookkeeping).
    pub fn stored_size(&self) -> (usize, usize) {
        self.cluster.store.stored_size()
    }

    /// Inserts many objects without HTTP. Each needs `apiVersion`, `kind` and `metadata.name`
    /// (and `metadata.namespace` for namespaced kinds, else `default`); server fields (uid,
    /// creationTimestamp, generation, resourceVersion) are filled in. Existing objects are
    /// replaced. Watchers see the changes. CustomResourceDefinitions make their kinds served.
    /// Returns the last resourceVersion assigned.
    ///
    /// # Errors
    /// [`ApiError`] NotFound for an unknown kind or a missing namespace, Invalid for a missing
    /// name; objects before the failing one may already be stored.
    pub fn bulk_load(&self, objects: impl IntoIterator<Item = Value>) -> Result<u64, ApiError> {
        let now = now_rfc3339();
        let mut batches: Vec<Batch> = Vec::new();
        let mut known_ns: Vec<String> = Vec::new();
        let mut rv = self.cluster.store.current_rv();
        let mut crds = Vec::new();
        for mut obj in objects {
            let field = |p: &str| {
                obj.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let (api_version, kind, name) = (
                field("/apiVersion"),
                field("/kind"),
                field("/metadata/name"),
            );
            let res = self
                .cluster
                .registry
                .find_kind(&api_version, &kind)
                .ok_or_else(|| {
                    ApiError::not_found(&format!("kind {kind} in {api_version}"), &name)
                })?;
            if name.is_empty() {
                return Err(ApiError::invalid(
                    &kind,
                    "",
                    "metadata.name: Required value",
                ));
            }
            let mut ns = String::new();
            if res.namespaced {
                ns = Some(field("/metadata/namespace"))
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "default".into());
                if !known_ns.contains(&ns) {
                    if self.cluster.store.get("namespaces", "", &ns).is_none() {
                        return Err(ApiError::not_found("namespaces", &ns));
                    }
                    known_ns.push(ns.clone());
                }
                obj["metadata"]["namespace"] = json!(ns);
            }
            let meta = obj["metadata"]
                .as_object_mut()
                .expect("metadata checked above");
            meta.insert("uid".into(), json!(new_uid()));
            meta.insert("creationTimestamp".into(), json!(now));
            match crate::generation::on_create(&res) {
                Some(g) => meta.insert("generation".into(), json!(g)),
                None => meta.remove("generation"),
            };
            let table = res.table();
            if *table == *CRDS {
                let served = crd_resources(&obj).map_err(|m| ApiError::invalid(&kind, &name, m))?;
                crds.push((name.clone(), served));
                obj["status"] = crd_status(&obj);
            }
            match batches.iter_mut().find(|(t, _)| *t == table) {
                Some((_, b)) => b.push((ObjKey { ns, name }, obj)),
                None => batches.push((table, vec![(ObjKey { ns, name }, obj)])),
            }
            // Store in chunks so a large load never holds all parsed objects at once.
            if let Some(i) = batches.iter().position(|(_, b)| b.len() >= BULK_CHUNK) {
                let (table, objects) = batches.swap_remove(i);
                rv = self.cluster.store.bulk_put(&table, objects)?;
            }
        }
        for (table, objects) in batches {
            rv = self.cluster.store.bulk_put(&table, objects)?;
        }
        for (name, served) in crds {
            self.cluster.registry.install_crd(&name, served);
        }
        Ok(rv)
    }

    /// Stops accepting connections, ends watches, waits up to 5 s for open requests, and stops
    /// the background tasks.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn local_addr(
    l: &TcpListener,
    addr: SocketAddr,
    which: &'static str,
) -> Result<SocketAddr, StartError> {
    l.local_addr().map_err(|source| StartError::Bind {
        which,
        addr,
        source,
    })
}

async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    tls: Option<TlsAcceptor>,
    cancel: CancellationToken,
) {
    let graceful = GracefulShutdown::new();
    let service = router(app);
    loop {
        let (stream, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to accept a connection");
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let svc = TowerToHyperService::new(service.clone());
        let watcher = graceful.watcher();
        let tls = tls.clone();
        tokio::spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let result = match tls {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(s) => {
                        let conn = builder.serve_connection_with_upgrades(TokioIo::new(s), svc);
                        watcher.watch(conn.into_owned()).await
                    }
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                },
                None => {
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
                    watcher.watch(conn.into_owned()).await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard_alphabet_with_padding() {
        assert_eq!(crate::util::base64(b"hello"), "aGVsbG8=");
        assert_eq!(crate::util::base64(b"hi"), "aGk=");
        assert_eq!(crate::util::base64(b"abc"), "YWJj");
    }
}
