//! A small, stateful Kubernetes API server for tests: no real kube-apiserver can be installed on
//! the development and CI machines, and the plugins under test are separate processes.
//!
//! What it does (and nothing more):
//! - stores objects of a fixed set of resources (see [`store::RESOURCES`]), namespaced or not,
//!   stamping `uid`, `resourceVersion` (one global counter), `creationTimestamp` and
//!   `generation`;
//! - serves the custom resources only while their CustomResourceDefinition is stored (a new
//!   fixture has the workspace's, `galactic_kube::crds`, which equal the Galactic API's),
//!   and validates every create, update and patch of one as the real server does: unknown fields
//!   pruned (refused when seeding, [`Fixture::insert`], as `kubectl` refuses them), defaults
//!   applied, the structural schema checked (types, required, enums, bounds,
//!   lengths, item counts, patterns, formats, set and map lists, [`schema`]) and the
//!   `x-kubernetes-validations` CEL rules evaluated by a CEL interpreter with the Kubernetes
//!   libraries ([`cel`]); the `status` subresource (writes of the object keep the stored status,
//!   `/status` writes change only the status);
//! - GET / LIST (namespaced and across namespaces, `labelSelector` with `=`, `==`, `!=`, `k`,
//!   `!k`), POST, PUT, PATCH (merge, strategic-merge treated as merge, JSON patch, server-side
//!   apply treated as an upsert merge: no field-manager ownership) and DELETE with
//!   `uid`/`resourceVersion` preconditions;
//! - 404 `NotFound`, 409 `AlreadyExists` (create of an existing name) and 409 `Conflict` (stale
//!   `resourceVersion` on PUT/PATCH/DELETE), 422 `Invalid` with `details.causes` (field, reason,
//!   message as apimachinery words them, [`failure`]), as `Status` bodies;
//! - per-request fault injection ([`Fault`]): an error status, added latency, or a dropped
//!   connection, matched by method and path; and a latency for every request
//!   ([`Fixture::set_latency`]), the round trip to a server a network away;
//! - a record of every request ([`Seen`]) so tests can assert what the client sent, and how many
//!   requests of which verb and resource an operation made ([`count_requests`]).
//!
//! It serves the same handler in-process ([`Fixture::service`], a `tower::Service` for
//! `kube::Client::new`, no transport and no authentication) and over HTTPS on a loopback port
//! ([`ApiServer`]: HTTP/2 or HTTP/1.1 (ALPN) over TLS with a cluster CA and a server certificate made per server
//! ([`tls`]), 401 `Unauthorized` without its bearer token), with a kubeconfig writer for child
//! processes that trusts that CA and presents that token, as production's does. There is no
//! plain-HTTP server: what the plugins meet in a cluster is TLS with verification on. No watch,
//! no discovery, no admission, no finalizers.

pub mod cel;
pub mod failure;
mod http;
mod resources;
pub mod schema;
pub mod store;
pub mod tls;
pub mod validate;

pub use http::FixtureService;

use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use store::Store;

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP status and a `Status` body, without touching the store.
    Status(u16),
    /// Wait this long, then serve the request normally.
    Delay(Duration),
    /// Close the connection without an answer (the request is not applied).
    Drop,
    /// Store this object as [`Fixture::insert`] does, then serve the request normally: another
    /// writer's object that appeared just before the request (a create of its name meets 409).
    InsertFirst(Value),
}

/// A fault for the next `times` requests matching `method` (any when `None`) and whose path
/// contains `path_contains`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// HTTP method to match (`GET`, `POST`, …), or any.
    pub method: Option<String>,
    /// Substring of the request path to match.
    pub path_contains: String,
    /// How many matching requests it applies to.
    pub times: usize,
    /// What happens.
    pub action: FaultAction,
}

impl Fault {
    /// A fault on `times` requests of `method` to paths containing `path_contains`.
    pub fn on(method: &str, path_contains: &str, times: usize, action: FaultAction) -> Self {
        Self {
            method: Some(method.to_owned()),
            path_contains: path_contains.to_owned(),
            times,
            action,
        }
    }
}

/// One request as the fixture received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// `Content-Type`, if sent.
    pub content_type: Option<String>,
    /// HTTP status answered (0 for a dropped connection).
    pub status: u16,
    /// The HTTP version it came over (`HTTP/1.1`, `HTTP/2.0`).
    pub version: String,
}

impl Seen {
    /// What the request does, in the API's words: `get`, `list`, `create`, `update`, `patch`,
    /// `delete` (a collection GET is a `list`).
    pub fn verb(&self) -> &'static str {
        let names_one = self.resource_path().is_some_and(|(_, name)| name.is_some());
        match (self.method.as_str(), names_one) {
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", _) => "delete",
            _ => "other",
        }
    }

    /// The resource's plural (`bgpadvertisements`, `pods`, …), or the path when it names none.
    pub fn resource(&self) -> String {
        self.resource_path()
            .map_or_else(|| self.path.clone(), |(plural, _)| plural.to_owned())
    }

    /// `(plural, name)` of `/api/v1/...` and `/apis/<group>/<version>/...` paths.
    fn resource_path(&self) -> Option<(&str, Option<&str>)> {
        let segments: Vec<&str> = self.path.trim_matches('/').split('/').collect();
        let rest = match segments.as_slice() {
            ["api", _, rest @ ..] => rest,
            ["apis", _, _, rest @ ..] => rest,
            _ => return None,
        };
        let rest = match rest {
            ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
            other => other,
        };
        match rest {
            [plural] => Some((plural, None)),
            [plural, name, ..] => Some((plural, Some(name))),
            [] => None,
        }
    }
}

/// Requests counted by `(verb, resource)` ([`Seen::verb`], [`Seen::resource`]), sorted.
pub type RequestCounts = std::collections::BTreeMap<(String, String), usize>;

/// `requests` counted by verb and resource.
pub fn count_requests(requests: &[Seen]) -> RequestCounts {
    let mut counts = RequestCounts::new();
    for seen in requests {
        *counts
            .entry((seen.verb().to_owned(), seen.resource()))
            .or_default() += 1;
    }
    counts
}

#[derive(Default)]
struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Vec<Fault>>,
    seen: Mutex<Vec<Seen>>,
    /// Waited before every request is answered: the round trip to an API server a network
    /// away, on a loopback socket.
    latency: Mutex<Duration>,
}

/// A handle on one fixture's state; cheap to clone, shared by every server and service built
/// from it.
#[derive(Clone)]
pub struct Fixture {
    shared: Arc<Shared>,
}

impl Default for Fixture {
    fn default() -> Self {
        let fixture = Self::without_crds();
        for (_, crd) in galactic_kube::crds() {
            fixture.insert(crd);
        }
        fixture
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not hide the state from the others.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Fixture {
    /// A fixture with the workspace's CRDs installed and nothing else.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fixture with nothing stored, not even CRDs (the custom resources answer 404 until one
    /// is inserted).
    pub fn without_crds() -> Self {
        Self {
            shared: Arc::default(),
        }
    }

    /// The fixture as a `tower::Service`, for `kube::Client::new(service, "default")`.
    pub fn service(&self) -> FixtureService {
        FixtureService::new(self.clone())
    }

    /// Stores `object` as `kubectl create` would (a field the schema does not have is refused,
    /// as under kubectl's strict field validation, rather than pruned; defaulted, validated,
    /// metadata stamped) but keeping its `status` and bypassing faults; its `apiVersion` and
    /// `kind` pick the resource. Panics on an unknown kind or an object the server would refuse
    /// (tests only: every seeded object is one the real server would store as written).
    pub fn insert(&self, object: Value) -> Value {
        self.try_insert(object)
            .unwrap_or_else(|e| panic!("fixture insert: {e}"))
    }

    /// [`Fixture::insert`] answering what the server would answer instead of panicking (a
    /// manifest check: would the API server store this object?).
    pub fn try_insert(&self, object: Value) -> Result<Value, store::Failure> {
        lock(&self.shared.store).insert(object)
    }

    /// The stored object `plural` `namespace/name` (`namespace` `None` for cluster-scoped).
    pub fn get(&self, plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        lock(&self.shared.store).get(plural, namespace.unwrap_or(""), name)
    }

    /// Every stored object of `plural` (in `namespace`, or all), sorted by namespace and name.
    pub fn list(&self, plural: &str, namespace: Option<&str>) -> Vec<Value> {
        lock(&self.shared.store).list(plural, namespace)
    }

    /// Removes an object without a request (e.g. a pod that went away).
    pub fn remove(&self, plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        lock(&self.shared.store).remove(plural, namespace.unwrap_or(""), name)
    }

    /// Queues a fault.
    pub fn inject(&self, fault: Fault) {
        lock(&self.shared.faults).push(fault);
    }

    /// Drops every queued fault (the API server recovers).
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.shared.seen).clone()
    }

    /// How many requests were received so far (to count those of one operation:
    /// `requests()[before..]`).
    pub fn request_count(&self) -> usize {
        lock(&self.shared.seen).len()
    }

    /// Waits `latency` before answering every request from now on (each request waits on its
    /// own: requests in flight together wait together, as over a network).
    pub fn set_latency(&self, latency: Duration) {
        *lock(&self.shared.latency) = latency;
    }

    fn latency(&self) -> Duration {
        *lock(&self.shared.latency)
    }

    /// Takes the first queued fault matching the request, decrementing its count.
    fn take_fault(&self, method: &str, path: &str) -> Option<FaultAction> {
        let mut faults = lock(&self.shared.faults);
        let index = faults.iter().position(|f| {
            f.times > 0
                && f.method.as_deref().is_none_or(|m| m == method)
                && path.contains(&f.path_contains)
        })?;
        let fault = &mut faults[index];
        fault.times -= 1;
        let action = fault.action.clone();
        if fault.times == 0 {
            faults.remove(index);
        }
        Some(action)
    }

    fn record(&self, seen: Seen) {
        lock(&self.shared.seen).push(seen);
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        lock(&self.shared.store)
    }
}

/// The fixture served over HTTPS (HTTP/2 or HTTP/1.1 by ALPN, over TLS) by a background thread, as a cluster
/// serves its API: a certificate signed by a cluster CA of its own, and every request must carry
/// its bearer token. Stopped on drop.
pub struct ApiServer {
    fixture: Fixture,
    addr: SocketAddr,
    ca_pem: String,
    token: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How to start an [`ApiServer`]: the fixture it serves, the socket it listens on, the token it
/// requires. [`ApiServer::builder`] starts from a new fixture on an ephemeral 127.0.0.1 port and
/// a random token.
pub struct ServerBuilder {
    fixture: Fixture,
    listen: Listen,
    token: Option<String>,
}

enum Listen {
    Bind(SocketAddr),
    Bound(std::net::TcpListener),
}

impl ServerBuilder {
    /// Serves `fixture` instead of a new one.
    pub fn fixture(mut self, fixture: Fixture) -> Self {
        self.fixture = fixture;
        self
    }

    /// Binds `addr` (e.g. `[::1]:0` for IPv6 loopback, or a fixed port).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.listen = Listen::Bind(addr);
        self
    }

    /// Listens on a socket the caller bound (in the network namespace of its choosing: the
    /// socket stays in the namespace it was created in, whichever thread serves it).
    pub fn listener(mut self, listener: std::net::TcpListener) -> Self {
        self.listen = Listen::Bound(listener);
        self
    }

    /// Requires this bearer token (a service account's, say) instead of a random one.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Generates the server's CA and certificate and starts serving.
    pub fn start(self) -> std::io::Result<ApiServer> {
        let listener = match self.listen {
            Listen::Bind(addr) => std::net::TcpListener::bind(addr)?,
            Listen::Bound(listener) => listener,
        };
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let ca = tls::ClusterCa::generate()?;
        let token = match self.token {
            Some(token) => token,
            None => random_token()?,
        };
        let gate = http::Gate {
            tls: ca.server_config()?,
            token: token.clone(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let served = self.fixture.clone();
        let thread = std::thread::Builder::new()
            .name("kube-fixture".into())
            .spawn(move || http::serve_blocking(listener, served, gate, stopped))?;
        Ok(ApiServer {
            fixture: self.fixture,
            addr,
            ca_pem: ca.pem(),
            token,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// 32 hex digits from the kernel's random source: a token no other server of the test run shares,
/// made of characters the installer accepts in a service account token.
fn random_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl ApiServer {
    /// A builder: a new fixture on an ephemeral 127.0.0.1 port with a random token, until told
    /// otherwise.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            fixture: Fixture::new(),
            listen: Listen::Bind(SocketAddr::from(([127, 0, 0, 1], 0))),
            token: None,
        }
    }

    /// Serves a new fixture on an ephemeral loopback port.
    pub fn start() -> std::io::Result<Self> {
        Self::builder().start()
    }

    /// Serves `fixture` on an ephemeral loopback port.
    pub fn serve(fixture: Fixture) -> std::io::Result<Self> {
        Self::builder().fixture(fixture).start()
    }

    /// The fixture's state.
    pub fn fixture(&self) -> &Fixture {
        &self.fixture
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT` (`https://[::1]:PORT` on IPv6).
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The cluster CA's certificate, PEM: what a client must trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Writes [`ApiServer::ca_pem`] to `path` (a cluster's `ca.crt`).
    pub fn write_ca(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, &self.ca_pem)
    }

    /// The bearer token every request must carry.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// What [`ApiServer::write_kubeconfig`] writes, to change before writing it (another CA,
    /// another token, a `tls-server-name`, the CA inline).
    pub fn kubeconfig(&self) -> Kubeconfig {
        Kubeconfig {
            server: self.url(),
            ca_pem: self.ca_pem.clone(),
            ca: CaPlacement::Beside,
            token: self.token.clone(),
            tls_server_name: None,
        }
    }

    /// Writes a kubeconfig pointing at this server as the installer writes one (`https` server,
    /// `certificate-authority` naming a CA file, written beside it, token user), with namespace
    /// `default`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        self.kubeconfig().write(path)
    }
}

/// Where a [`Kubeconfig`] keeps the CA it trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaPlacement {
    /// A file beside the kubeconfig (`<kubeconfig>.ca.crt`), named by `certificate-authority`.
    Beside,
    /// This file, named by `certificate-authority` (written with the kubeconfig).
    File(std::path::PathBuf),
    /// Inline, base64 in `certificate-authority-data`.
    Inline,
}

/// A kubeconfig for an [`ApiServer`] (one cluster, one token user, one context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubeconfig {
    /// `clusters[].cluster.server`.
    pub server: String,
    /// The CA certificate (PEM) the client trusts.
    pub ca_pem: String,
    /// Where the CA goes.
    pub ca: CaPlacement,
    /// `users[].user.token`.
    pub token: String,
    /// `clusters[].cluster.tls-server-name`, when the certificate is to be verified for another
    /// name than the server URL's host.
    pub tls_server_name: Option<String>,
}

impl Kubeconfig {
    /// Writes the kubeconfig to `path` (and the CA file it names, if any).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut cluster = serde_json::json!({"server": self.server});
        let ca_file = match &self.ca {
            CaPlacement::Beside => {
                let mut name = path.as_os_str().to_owned();
                name.push(".ca.crt");
                Some(std::path::PathBuf::from(name))
            }
            CaPlacement::File(file) => Some(file.clone()),
            CaPlacement::Inline => None,
        };
        match ca_file {
            Some(file) => {
                std::fs::write(&file, &self.ca_pem)?;
                cluster["certificate-authority"] = serde_json::json!(file);
            }
            None => {
                let data = k8s_openapi::ByteString(self.ca_pem.clone().into_bytes());
                cluster["certificate-authority-data"] =
                    serde_json::to_value(data).map_err(std::io::Error::other)?;
            }
        }
        if let Some(name) = &self.tls_server_name {
            cluster["tls-server-name"] = serde_json::json!(name);
        }
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fixture", "cluster": cluster}],
            "users": [{"name": "fixture", "user": {"token": self.token}}],
            "contexts": [{"name": "fixture", "context": {"cluster": "fixture", "user": "fixture", "namespace": "default"}}],
            "current-context": "fixture",
        });
        std::fs::write(path, config.to_string())
    }
}
impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
