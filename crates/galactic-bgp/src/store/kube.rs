//! The Kubernetes backend: every operation is one API call through [`KubeClient`] (per-call
//! timeout, transient retry); objects travel as `DynamicObject`s of the typed resources.

use super::{meta_str, Done, Kind, ObjectStore, Op, StoreError};
use galactic_kube::{KubeClient, RetryPolicy, Together, TogetherFuture};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use serde_json::Value;

/// Publication through the Kubernetes API.
pub struct KubeStore {
    client: KubeClient,
}

fn resource(kind: Kind) -> ApiResource {
    let (group, version, kind_name, plural) = kind.meta();
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: kind.api_version(),
        kind: kind_name.into(),
        plural: plural.into(),
    }
}

fn to_dynamic(object: &Value) -> Result<DynamicObject, StoreError> {
    serde_json::from_value(object.clone()).map_err(|e| StoreError::Shape {
        what: "object to write".into(),
        why: e.to_string(),
    })
}

/// A DELETE guarded by `uid` and, when given, `version`.
fn delete_params(uid: &str, version: Option<&str>) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: version.map(str::to_owned),
        }),
        ..DeleteParams::default()
    }
}

/// An object read inside a request future (a shape error there is the response's).
fn value(object: DynamicObject) -> Result<Value, kube::Error> {
    serde_json::to_value(object).map_err(kube::Error::SerdeError)
}

fn values(objects: Vec<DynamicObject>) -> Result<Vec<Value>, kube::Error> {
    objects.into_iter().map(value).collect()
}

fn to_value(object: DynamicObject) -> Result<Value, StoreError> {
    serde_json::to_value(object).map_err(|e| StoreError::Shape {
        what: "object read".into(),
        why: e.to_string(),
    })
}

impl KubeStore {
    /// A store over `client`.
    pub fn new(client: KubeClient) -> Self {
        Self { client }
    }

    /// The client (for node-name detection).
    pub fn client(&self) -> &KubeClient {
        &self.client
    }

    fn api(&self, client: kube::Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client, namespace, &resource(kind))
    }
}

impl ObjectStore for KubeStore {
    fn list(&self, kind: Kind, namespace: &str) -> Result<Vec<Value>, StoreError> {
        let what = format!("list {} in {namespace}", kind.plural());
        let list = self
            .client
            .call(&what, |c| {
                let api = self.api(c, kind, namespace);
                async move { api.list(&ListParams::default()).await }
            })
            .map_err(|e| StoreError::from_kube(e, false))?;
        list.items.into_iter().map(to_value).collect()
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Result<Option<Value>, StoreError> {
        let what = format!("get {} {namespace}/{name}", kind.kind());
        let found = self
            .client
            .call(&what, |c| {
                let api = self.api(c, kind, namespace);
                async move { api.get_opt(name).await }
            })
            .map_err(|e| StoreError::from_kube(e, false))?;
        found.map(to_value).transpose()
    }

    fn create(&self, kind: Kind, namespace: &str, object: &Value) -> Result<Value, StoreError> {
        let dynamic = to_dynamic(object)?;
        let what = format!(
            "create {} {namespace}/{}",
            kind.kind(),
            dynamic.metadata.name.as_deref().unwrap_or_default()
        );
        let created = self
            .client
            .call(&what, |c| {
                let (api, dynamic) = (self.api(c, kind, namespace), dynamic.clone());
                async move { api.create(&PostParams::default(), &dynamic).await }
            })
            .map_err(|e| StoreError::from_kube(e, true))?;
        to_value(created)
    }

    fn replace(&self, kind: Kind, namespace: &str, object: &Value) -> Result<Value, StoreError> {
        let dynamic = to_dynamic(object)?;
        let name = dynamic.metadata.name.clone().unwrap_or_default();
        let what = format!("update {} {namespace}/{name}", kind.kind());
        let replaced = self
            .client
            .call(&what, |c| {
                let (api, dynamic, name) =
                    (self.api(c, kind, namespace), dynamic.clone(), name.clone());
                async move { api.replace(&name, &PostParams::default(), &dynamic).await }
            })
            .map_err(|e| StoreError::from_kube(e, false))?;
        to_value(replaced)
    }

    fn merge_patch(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, StoreError> {
        let what = format!("patch {} {namespace}/{name}", kind.kind());
        let patched = self
            .client
            .call(&what, |c| {
                let api = self.api(c, kind, namespace);
                let patch = patch.clone();
                async move {
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                }
            })
            .map_err(|e| StoreError::from_kube(e, false))?;
        to_value(patched)
    }

    fn delete(&self, kind: Kind, namespace: &str, name: &str, uid: &str) -> Result<(), StoreError> {
        self.delete_with(kind, namespace, name, uid, None)
    }

    fn delete_unchanged(
        &self,
        kind: Kind,
        namespace: &str,
        object: &Value,
    ) -> Result<(), StoreError> {
        let (name, uid) = (
            meta_str(object, "name").unwrap_or_default(),
            meta_str(object, "uid").unwrap_or_default(),
        );
        let version = meta_str(object, "resourceVersion");
        self.delete_with(kind, namespace, name, uid, version)
    }

    /// Every request in flight together ([`KubeClient::call_together`]).
    fn batch(&self, ops: &[Op<'_>]) -> Vec<Result<Done, StoreError>> {
        let mut calls = Vec::with_capacity(ops.len());
        for op in ops {
            match self.together(*op) {
                Ok(call) => calls.push(call),
                Err(e) => return vec![Err(e)],
            }
        }
        self.client
            .call_together(calls)
            .into_iter()
            .zip(ops)
            .map(|(answer, op)| {
                let creates = matches!(op, Op::Create { .. });
                answer.map_err(|e| StoreError::from_kube(e, creates))
            })
            .collect()
    }

    fn probe(&self, namespace: &str) -> Result<(), StoreError> {
        let what = format!("STATUS: list bgprouters in {namespace}");
        self.client
            .call_with(&what, RetryPolicy::once(), |c| {
                let api = self.api(c, Kind::Router, namespace);
                async move { api.list(&ListParams::default().limit(1)).await.map(drop) }
            })
            .map_err(StoreError::Kube)
    }
}

/// A CustomResourceDefinition as this node finds it.
pub enum InstalledCrd {
    /// The stored CRD document.
    Found(Value),
    /// No such CRD (404).
    Missing,
    /// This node may not read it (403: a deployment whose RBAC predates the check).
    Forbidden,
}

impl KubeStore {
    /// `op` as a call of [`KubeClient::call_together`]: what it is, for messages and logs, and
    /// how to make its request (again, on a retry), one builder per kind of request.
    fn together<'a>(&'a self, op: Op<'a>) -> Result<Together<'a, Done>, StoreError> {
        Ok(match op {
            Op::List { kind, namespace } => self.list_call(kind, namespace),
            Op::Get {
                kind,
                namespace,
                name,
            } => self.get_call(kind, namespace, name),
            Op::Create {
                kind,
                namespace,
                object,
            } => self.create_call(kind, namespace, object)?,
            Op::Delete {
                kind,
                namespace,
                name,
                uid,
                version,
            } => self.delete_call(kind, namespace, name, delete_params(uid, version)),
        })
    }

    /// The list of every `kind` in `namespace`.
    fn list_call<'a>(&'a self, kind: Kind, namespace: &'a str) -> Together<'a, Done> {
        Together {
            what: format!("list {} in {namespace}", kind.plural()),
            op: Box::new(move |c| {
                let api = self.api(c, kind, namespace);
                Box::pin(async move {
                    let list = api.list(&ListParams::default()).await?;
                    Ok(Done::Listed(values(list.items)?))
                }) as TogetherFuture<'a, Done>
            }),
        }
    }

    /// The get of `namespace/name`, absent being an answer.
    fn get_call<'a>(&'a self, kind: Kind, namespace: &'a str, name: &'a str) -> Together<'a, Done> {
        Together {
            what: format!("get {} {namespace}/{name}", kind.kind()),
            op: Box::new(move |c| {
                let api = self.api(c, kind, namespace);
                Box::pin(async move {
                    let found = api.get_opt(name).await?;
                    Ok(Done::Found(found.map(value).transpose()?))
                }) as TogetherFuture<'a, Done>
            }),
        }
    }

    /// The create of `object`, converted once here so a retry sends the same document.
    fn create_call<'a>(
        &'a self,
        kind: Kind,
        namespace: &'a str,
        object: &Value,
    ) -> Result<Together<'a, Done>, StoreError> {
        let dynamic = to_dynamic(object)?;
        let name = dynamic.metadata.name.clone().unwrap_or_default();
        Ok(Together {
            what: format!("create {} {namespace}/{name}", kind.kind()),
            op: Box::new(move |c| {
                let (api, dynamic) = (self.api(c, kind, namespace), dynamic.clone());
                Box::pin(async move {
                    let created = api.create(&PostParams::default(), &dynamic).await?;
                    Ok(Done::Created(value(created)?))
                }) as TogetherFuture<'a, Done>
            }),
        })
    }

    /// The delete of `namespace/name` guarded by `params`; an absent object (404) is deleted.
    fn delete_call<'a>(
        &'a self,
        kind: Kind,
        namespace: &'a str,
        name: &'a str,
        params: DeleteParams,
    ) -> Together<'a, Done> {
        Together {
            what: format!("delete {} {namespace}/{name}", kind.kind()),
            op: Box::new(move |c| {
                let (api, params) = (self.api(c, kind, namespace), params.clone());
                Box::pin(async move {
                    match api.delete(name, &params).await {
                        Ok(_) => Ok(Done::Deleted),
                        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Done::Deleted),
                        Err(e) => Err(e),
                    }
                }) as TogetherFuture<'a, Done>
            }),
        }
    }

    /// The CustomResourceDefinition `name` as installed (one attempt: STATUS).
    pub fn installed_crd(&self, name: &str) -> Result<InstalledCrd, StoreError> {
        let what = format!("STATUS: get CustomResourceDefinition {name}");
        let crds = ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        };
        let found = self.client.call_with(&what, RetryPolicy::once(), |c| {
            let api: Api<DynamicObject> = Api::all_with(c, &crds);
            async move { api.get(name).await }
        });
        match found {
            Ok(crd) => Ok(InstalledCrd::Found(to_value(crd)?)),
            Err(e) if e.is_not_found() => Ok(InstalledCrd::Missing),
            Err(e) if e.status_code() == Some(403) => Ok(InstalledCrd::Forbidden),
            Err(e) => Err(StoreError::Kube(e)),
        }
    }

    /// DELETE with a uid (and optionally a resourceVersion) precondition; 404 is success.
    fn delete_with(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        uid: &str,
        version: Option<&str>,
    ) -> Result<(), StoreError> {
        let what = format!("delete {} {namespace}/{name}", kind.kind());
        let params = delete_params(uid, version);
        match self.client.call(&what, |c| {
            let (api, params) = (self.api(c, kind, namespace), params.clone());
            async move { api.delete(name, &params).await.map(drop) }
        }) {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(StoreError::from_kube(e, false)),
        }
    }
}
