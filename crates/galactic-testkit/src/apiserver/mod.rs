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
//!   pruned, defaults applied, the structural schema checked (types, required, enums, bounds,
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
//!   connection, matched by method and path;
//! - a record of every request ([`Seen`]) so tests can assert what the client sent.
//!
//! It serves the same handler in-process ([`Fixture::service`], a `tower::Service` for
//! `kube::Client::new`) and over HTTP/1.1 on an ephemeral 127.0.0.1 port ([`ApiServer`]), with a
//! kubeconfig writer for child processes. No watch, no discovery, no admission, no finalizers.

pub mod cel;
pub mod failure;
mod http;
mod resources;
pub mod schema;
pub mod store;
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
}

#[derive(Default)]
struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Vec<Fault>>,
    seen: Mutex<Vec<Seen>>,
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

    /// Stores `object` as a client create would (pruned, defaulted, validated, metadata stamped)
    /// but keeping its `status` and bypassing faults; its `apiVersion` and `kind` pick the
    /// resource. Panics on an unknown kind or an object the server would refuse (tests only:
    /// every seeded object is one the real server would store).
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

/// The fixture served over HTTP/1.1 on 127.0.0.1 by a background thread; stopped on drop.
pub struct ApiServer {
    fixture: Fixture,
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ApiServer {
    /// Serves a new, empty fixture on an ephemeral loopback port.
    pub fn start() -> std::io::Result<Self> {
        Self::serve(Fixture::new())
    }

    /// Serves `fixture` on an ephemeral loopback port.
    pub fn serve(fixture: Fixture) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let served = fixture.clone();
        let thread = std::thread::Builder::new()
            .name("kube-fixture".into())
            .spawn(move || http::serve_blocking(listener, served, stopped))?;
        Ok(Self {
            fixture,
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The fixture's state.
    pub fn fixture(&self) -> &Fixture {
        &self.fixture
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes a kubeconfig pointing at this server (token user, namespace `default`).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fixture", "cluster": {"server": self.url()}}],
            "users": [{"name": "fixture", "user": {"token": "fixture"}}],
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
