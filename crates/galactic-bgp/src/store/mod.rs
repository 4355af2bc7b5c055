//! Publication backends: where the BGPVRFInstance, BGPAdvertisement and EndpointSlice documents
//! go. The publish algorithm ([`crate::publish`]) runs unchanged over either backend.
//!
//! - [`kube::KubeStore`]: the Kubernetes API (node config `publisher: kubernetes`).
//! - [`local::LocalStore`]: JSON files under the node's state directory (`publisher: local`).
//!
//! The backends move whole documents ([`ObjectStore`]); the publish algorithm reads and writes
//! typed resources through [`Documents`] (the CRD types of `galactic_kube`, EndpointSlice,
//! Pod), converted at this boundary only.

pub mod kube;
pub mod local;

use galactic_core::lockfile::LockError;
use galactic_core::state::StateError;
use galactic_kube::KubeError;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// A resource the backends store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `network.datumapis.com/v1alpha1` BGPRouter (read only).
    Router,
    /// `network.datumapis.com/v1alpha1` BGPVRFInstance.
    VrfInstance,
    /// `network.datumapis.com/v1alpha1` BGPAdvertisement.
    Advertisement,
    /// `discovery.k8s.io/v1` EndpointSlice.
    EndpointSlice,
    /// `v1` Pod (read only).
    Pod,
}

impl Kind {
    /// `(group, version, kind, plural)`.
    pub fn meta(self) -> (&'static str, &'static str, &'static str, &'static str) {
        use galactic_kube::{GROUP, VERSION};
        match self {
            Self::Router => (GROUP, VERSION, "BGPRouter", "bgprouters"),
            Self::VrfInstance => (GROUP, VERSION, "BGPVRFInstance", "bgpvrfinstances"),
            Self::Advertisement => (GROUP, VERSION, "BGPAdvertisement", "bgpadvertisements"),
            Self::EndpointSlice => ("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
            Self::Pod => ("", "v1", "Pod", "pods"),
        }
    }

    /// `apiVersion`.
    pub fn api_version(self) -> String {
        let (group, version, _, _) = self.meta();
        if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }
    }

    /// `kind`.
    pub fn kind(self) -> &'static str {
        self.meta().2
    }

    /// URL / directory plural.
    pub fn plural(self) -> &'static str {
        self.meta().3
    }
}

/// Why a backend operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Create of a name that exists.
    #[error("{what}: already exists")]
    Exists {
        /// Operation and object.
        what: String,
    },
    /// The object changed since it was read (stale resourceVersion or uid).
    #[error("{what}: the object was modified concurrently")]
    Conflict {
        /// Operation and object.
        what: String,
    },
    /// The object does not exist.
    #[error("{what}: not found")]
    NotFound {
        /// Operation and object.
        what: String,
    },
    /// The Kubernetes API failed.
    #[error(transparent)]
    Kube(KubeError),
    /// A local file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// Operation and path.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A local document is not valid JSON.
    #[error("{path}: not a JSON document: {why}")]
    Corrupt {
        /// The file.
        path: String,
        /// The parse error.
        why: String,
    },
    /// The local state lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// A local document cannot be written.
    #[error(transparent)]
    State(#[from] StateError),
    /// A stored object does not have the expected shape.
    #[error("{what}: unexpected object: {why}")]
    Shape {
        /// The object.
        what: String,
        /// What is wrong.
        why: String,
    },
}

impl StoreError {
    /// Maps a client error of `what`, separating 404 and 409 (as `conflict_is`) from the rest.
    pub fn from_kube(err: KubeError, conflict_is_exists: bool) -> Self {
        let what = err.to_string();
        if err.is_not_found() {
            Self::NotFound { what }
        } else if err.is_conflict() && conflict_is_exists {
            Self::Exists { what }
        } else if err.is_conflict() {
            Self::Conflict { what }
        } else {
            Self::Kube(err)
        }
    }

    /// Whether this is [`StoreError::Exists`].
    pub fn is_exists(&self) -> bool {
        matches!(self, Self::Exists { .. })
    }

    /// Whether this is [`StoreError::Conflict`].
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }
}

/// A document store with Kubernetes semantics (names per namespace, resourceVersion
/// preconditions, uid-guarded deletes). Objects are whole Kubernetes JSON documents.
pub trait ObjectStore {
    /// Every object of `kind` in `namespace`.
    fn list(&self, kind: Kind, namespace: &str) -> Result<Vec<Value>, StoreError>;
    /// One object, `None` when absent.
    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Result<Option<Value>, StoreError>;
    /// Creates `object`; [`StoreError::Exists`] when the name is taken. Returns it as stored.
    fn create(&self, kind: Kind, namespace: &str, object: &Value) -> Result<Value, StoreError>;
    /// Replaces an object; `metadata.resourceVersion` in `object` is a precondition
    /// ([`StoreError::Conflict`]).
    fn replace(&self, kind: Kind, namespace: &str, object: &Value) -> Result<Value, StoreError>;
    /// Merge-patches an object (RFC 7386): fields absent from `patch` are kept.
    fn merge_patch(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, StoreError>;
    /// Deletes an object if its uid is `uid`; an absent object is fine.
    fn delete(&self, kind: Kind, namespace: &str, name: &str, uid: &str) -> Result<(), StoreError>;
    /// Deletes `object` only if it is still exactly as read (its uid and resourceVersion):
    /// [`StoreError::Conflict`] when another writer changed it since. An absent object is fine.
    fn delete_unchanged(
        &self,
        kind: Kind,
        namespace: &str,
        object: &Value,
    ) -> Result<(), StoreError>;
    /// Readiness: the backend can be written (STATUS).
    fn probe(&self, namespace: &str) -> Result<(), StoreError>;
    /// Every request of `ops`, each answered as its own call would be, in order. The Kubernetes
    /// backend has them in flight together (one round trip for all); locally they run one by
    /// one. For requests no answer of another depends on.
    fn batch(&self, ops: &[Op<'_>]) -> Vec<Result<Done, StoreError>> {
        ops.iter().map(|op| one(self, op)).collect()
    }
}

/// One request of [`ObjectStore::batch`].
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    /// [`ObjectStore::list`].
    List {
        /// Of what.
        kind: Kind,
        /// Where.
        namespace: &'a str,
    },
    /// [`ObjectStore::get`].
    Get {
        /// Of what.
        kind: Kind,
        /// Where.
        namespace: &'a str,
        /// Which.
        name: &'a str,
    },
    /// [`ObjectStore::create`].
    Create {
        /// Of what.
        kind: Kind,
        /// Where.
        namespace: &'a str,
        /// The document.
        object: &'a Value,
    },
    /// A delete guarded by the object's uid and, when known, its resourceVersion
    /// ([`ObjectStore::delete_unchanged`]); an absent object is fine.
    Delete {
        /// Of what.
        kind: Kind,
        /// Where.
        namespace: &'a str,
        /// Which.
        name: &'a str,
        /// Its uid.
        uid: &'a str,
        /// Its resourceVersion, when the delete is of the object exactly as it was.
        version: Option<&'a str>,
    },
}

/// The answer to one [`Op`].
#[derive(Debug, Clone, PartialEq)]
pub enum Done {
    /// [`Op::List`]'s objects.
    Listed(Vec<Value>),
    /// [`Op::Get`]'s object, `None` when absent.
    Found(Option<Value>),
    /// [`Op::Create`]'s object as stored.
    Created(Value),
    /// [`Op::Delete`] done (or nothing was there).
    Deleted,
}

/// `op` on `store`, alone.
fn one<S: ObjectStore + ?Sized>(store: &S, op: &Op<'_>) -> Result<Done, StoreError> {
    Ok(match *op {
        Op::List { kind, namespace } => Done::Listed(store.list(kind, namespace)?),
        Op::Get {
            kind,
            namespace,
            name,
        } => Done::Found(store.get(kind, namespace, name)?),
        Op::Create {
            kind,
            namespace,
            object,
        } => Done::Created(store.create(kind, namespace, object)?),
        Op::Delete {
            kind,
            namespace,
            name,
            uid,
            version: None,
        } => store
            .delete(kind, namespace, name, uid)
            .map(|()| Done::Deleted)?,
        Op::Delete {
            kind,
            namespace,
            name,
            uid,
            version: Some(version),
        } => {
            let object = serde_json::json!({"metadata": {
                "name": name, "uid": uid, "resourceVersion": version}});
            store
                .delete_unchanged(kind, namespace, &object)
                .map(|()| Done::Deleted)?
        }
    })
}

impl Done {
    /// The objects of a [`Done::Listed`].
    pub fn listed(self) -> Result<Vec<Value>, StoreError> {
        match self {
            Self::Listed(objects) => Ok(objects),
            other => Err(other.unexpected("a list")),
        }
    }

    /// The object of a [`Done::Found`].
    pub fn found(self) -> Result<Option<Value>, StoreError> {
        match self {
            Self::Found(object) => Ok(object),
            other => Err(other.unexpected("a get")),
        }
    }

    /// The object of a [`Done::Created`].
    pub fn created(self) -> Result<Value, StoreError> {
        match self {
            Self::Created(object) => Ok(object),
            other => Err(other.unexpected("a create")),
        }
    }

    fn unexpected(&self, of: &str) -> StoreError {
        StoreError::Shape {
            what: format!("the answer to {of}"),
            why: format!("answered {}", self.what()),
        }
    }

    /// What kind of answer this is, for messages.
    fn what(&self) -> &'static str {
        match self {
            Self::Listed(_) => "a list",
            Self::Found(_) => "a get",
            Self::Created(_) => "a create",
            Self::Deleted => "a delete",
        }
    }
}

/// `metadata.<field>` of a document.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// A resource the publish algorithm reads or writes, typed.
pub trait Document: Serialize + DeserializeOwned {
    /// Its kind.
    const KIND: Kind;
}

impl Document for galactic_kube::BGPRouter {
    const KIND: Kind = Kind::Router;
}
impl Document for galactic_kube::BGPVRFInstance {
    const KIND: Kind = Kind::VrfInstance;
}
impl Document for galactic_kube::BGPAdvertisement {
    const KIND: Kind = Kind::Advertisement;
}
impl Document for EndpointSlice {
    const KIND: Kind = Kind::EndpointSlice;
}
impl Document for Pod {
    const KIND: Kind = Kind::Pod;
}

/// The stored document `value` as a `D` (a document of another shape is [`StoreError::Shape`]).
pub fn parse<D: Document>(value: Value) -> Result<D, StoreError> {
    let name = meta_str(&value, "name").unwrap_or_default().to_owned();
    serde_json::from_value(value).map_err(|e| StoreError::Shape {
        what: format!("{} {name}", D::KIND.kind()),
        why: e.to_string(),
    })
}

/// `object` as the document a backend stores (`apiVersion` and `kind` set).
pub fn document<D: Document>(object: &D) -> Result<Value, StoreError> {
    let mut value = serde_json::to_value(object).map_err(|e| StoreError::Shape {
        what: format!("{} to write", D::KIND.kind()),
        why: e.to_string(),
    })?;
    value["apiVersion"] = Value::from(D::KIND.api_version());
    value["kind"] = Value::from(D::KIND.kind());
    Ok(value)
}

/// Typed access to any [`ObjectStore`].
pub trait Documents {
    /// Every `D` in `namespace`, with the documents that are not a `D` apart.
    fn list_typed<D: Document>(
        &self,
        namespace: &str,
    ) -> Result<Vec<Result<D, StoreError>>, StoreError>;
    /// One `D`, `None` when absent.
    fn get_typed<D: Document>(&self, namespace: &str, name: &str) -> Result<Option<D>, StoreError>;
    /// Creates `object` ([`StoreError::Exists`] when the name is taken); returns it as stored.
    fn create_typed<D: Document>(&self, namespace: &str, object: &D) -> Result<D, StoreError>;
    /// Replaces `object` (its resourceVersion, if any, is a precondition); returns it as stored.
    fn replace_typed<D: Document>(&self, namespace: &str, object: &D) -> Result<D, StoreError>;
    /// Merge-patches the `D` `name` with `patch` (fields absent from it are kept).
    fn merge_patch_typed<D: Document, P: Serialize>(
        &self,
        namespace: &str,
        name: &str,
        patch: &P,
    ) -> Result<D, StoreError>;
    /// Deletes `object` only if it is still exactly as read (its uid and resourceVersion).
    fn delete_unchanged_typed<D: Document>(
        &self,
        namespace: &str,
        object: &D,
    ) -> Result<(), StoreError>;
}

impl<S: ObjectStore + ?Sized> Documents for S {
    fn list_typed<D: Document>(
        &self,
        namespace: &str,
    ) -> Result<Vec<Result<D, StoreError>>, StoreError> {
        Ok(self
            .list(D::KIND, namespace)?
            .into_iter()
            .map(parse)
            .collect())
    }

    fn get_typed<D: Document>(&self, namespace: &str, name: &str) -> Result<Option<D>, StoreError> {
        self.get(D::KIND, namespace, name)?.map(parse).transpose()
    }

    fn create_typed<D: Document>(&self, namespace: &str, object: &D) -> Result<D, StoreError> {
        parse(self.create(D::KIND, namespace, &document(object)?)?)
    }

    fn replace_typed<D: Document>(&self, namespace: &str, object: &D) -> Result<D, StoreError> {
        parse(self.replace(D::KIND, namespace, &document(object)?)?)
    }

    fn merge_patch_typed<D: Document, P: Serialize>(
        &self,
        namespace: &str,
        name: &str,
        patch: &P,
    ) -> Result<D, StoreError> {
        let patch = serde_json::to_value(patch).map_err(|e| StoreError::Shape {
            what: format!("patch of {} {name}", D::KIND.kind()),
            why: e.to_string(),
        })?;
        parse(self.merge_patch(D::KIND, namespace, name, &patch)?)
    }

    fn delete_unchanged_typed<D: Document>(
        &self,
        namespace: &str,
        object: &D,
    ) -> Result<(), StoreError> {
        self.delete_unchanged(D::KIND, namespace, &document(object)?)
    }
}
