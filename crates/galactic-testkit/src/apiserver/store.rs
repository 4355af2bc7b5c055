//! The fixture's object store and the API semantics of each verb.

use super::validate;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// A resource the fixture serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural (the URL segment).
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const fn res(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group,
        version,
        plural,
        kind,
        namespaced,
    }
}

/// Every resource served; any other path is a 404, as for an unregistered CRD.
pub const RESOURCES: &[Resource] = &[
    res("", "v1", "pods", "Pod", true),
    res("", "v1", "nodes", "Node", false),
    res("", "v1", "configmaps", "ConfigMap", true),
    res(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
    ),
    res(
        galactic_core::kube::GROUP,
        galactic_core::kube::VERSION,
        "bgprouters",
        "BGPRouter",
        true,
    ),
    res(
        galactic_core::kube::GROUP,
        galactic_core::kube::VERSION,
        "bgpvrfinstances",
        "BGPVRFInstance",
        true,
    ),
    res(
        galactic_core::kube::GROUP,
        galactic_core::kube::VERSION,
        "bgpadvertisements",
        "BGPAdvertisement",
        true,
    ),
    res(
        "k8s.cni.cncf.io",
        "v1",
        "network-attachment-definitions",
        "NetworkAttachmentDefinition",
        true,
    ),
];

/// The resource for a URL's group, version and plural.
pub fn resource(group: &str, version: &str, plural: &str) -> Option<Resource> {
    RESOURCES
        .iter()
        .copied()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// A failed request, answered as a `Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// HTTP status.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, …).
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl Failure {
    /// A failure.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }

    /// The `Status` body.
    pub fn body(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        })
    }
}

/// A patch as the content type says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// RFC 7386 (also used for strategic merge, which these resources do not distinguish).
    Merge,
    /// RFC 6902.
    Json,
    /// Server-side apply: an upsert merge (no field ownership).
    Apply,
}

type Key = (&'static str, String, String);

/// The stored objects, keyed by (plural, namespace, name).
#[derive(Default)]
pub struct Store {
    objects: BTreeMap<Key, Value>,
    revision: u64,
}

fn meta(object: &Value, field: &str) -> Option<String> {
    object
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

impl Store {
    fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    fn uid(&self) -> String {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let n = self.revision;
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            (nanos >> 32) as u32,
            (nanos >> 16) as u16,
            n & 0xfff,
            (nanos & 0xfff) as u16,
            n
        )
    }

    fn stamp_new(&mut self, r: &Resource, namespace: &str, object: &mut Value) {
        let revision = self.next_revision();
        let uid = self.uid();
        object["apiVersion"] = json!(r.api_version());
        object["kind"] = json!(r.kind);
        let m = &mut object["metadata"];
        if r.namespaced {
            m["namespace"] = json!(namespace);
        }
        m["uid"] = json!(uid);
        m["resourceVersion"] = json!(revision);
        m["creationTimestamp"] =
            json!(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
        m["generation"] = json!(1);
    }

    /// Stores an object directly (fixture seeding), picking the resource from apiVersion/kind.
    pub fn insert(&mut self, mut object: Value) -> Result<Value, Failure> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let r = RESOURCES
            .iter()
            .copied()
            .find(|r| r.api_version() == api_version && r.kind == kind)
            .ok_or_else(|| {
                Failure::new(404, "NotFound", format!("no resource {api_version} {kind}"))
            })?;
        let namespace = meta(&object, "namespace").unwrap_or_default();
        let name = meta(&object, "name").ok_or_else(|| Failure::new(422, "Invalid", "no name"))?;
        self.stamp_new(&r, &namespace, &mut object);
        let ns = if r.namespaced {
            namespace
        } else {
            String::new()
        };
        self.objects.insert((r.plural, ns, name), object.clone());
        Ok(object)
    }

    /// One object.
    pub fn get(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        self.objects
            .iter()
            .find(|((p, ns, n), _)| *p == plural && ns == namespace && n == name)
            .map(|(_, v)| v.clone())
    }

    /// Objects of `plural` in `namespace` (or every namespace).
    pub fn list(&self, plural: &str, namespace: Option<&str>) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((p, ns, _), _)| *p == plural && namespace.is_none_or(|want| ns == want))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Removes an object.
    pub fn remove(&mut self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = self
            .objects
            .keys()
            .find(|(p, ns, n)| *p == plural && ns == namespace && n == name)
            .cloned()?;
        self.objects.remove(&key)
    }

    /// The current list revision.
    pub fn revision(&self) -> String {
        self.revision.to_string()
    }

    fn not_found(r: &Resource, name: &str) -> Failure {
        Failure::new(
            404,
            "NotFound",
            format!("{}.{} \"{name}\" not found", r.plural, r.group),
        )
    }

    /// Reads an object (404 when absent).
    pub fn read(&self, r: &Resource, namespace: &str, name: &str) -> Result<Value, Failure> {
        self.get(r.plural, namespace, name)
            .ok_or_else(|| Self::not_found(r, name))
    }

    /// Creates an object (409 AlreadyExists, 422 Invalid).
    pub fn create(
        &mut self,
        r: &Resource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, Failure> {
        let name = meta(&object, "name")
            .ok_or_else(|| Failure::new(422, "Invalid", "metadata.name: Required value"))?;
        if let Some(body_ns) = meta(&object, "namespace") {
            if r.namespaced && body_ns != namespace {
                return Err(Failure::new(
                    400,
                    "BadRequest",
                    "the namespace of the object does not match the namespace on the request",
                ));
            }
        }
        if self.get(r.plural, namespace, &name).is_some() {
            return Err(Failure::new(
                409,
                "AlreadyExists",
                format!("{}.{} \"{name}\" already exists", r.plural, r.group),
            ));
        }
        validate::object(r, &name, &object)?;
        self.stamp_new(r, namespace, &mut object);
        self.objects
            .insert((r.plural, namespace.to_owned(), name), object.clone());
        Ok(object)
    }

    /// Replaces an object (PUT): 404, 409 on a stale resourceVersion, 422.
    pub fn replace(
        &mut self,
        r: &Resource,
        namespace: &str,
        name: &str,
        object: Value,
    ) -> Result<Value, Failure> {
        let current = self.read(r, namespace, name)?;
        self.commit(r, namespace, name, &current, object)
    }

    /// Patches an object; an apply patch of an absent object creates it.
    pub fn patch(
        &mut self,
        r: &Resource,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        patch: &Value,
    ) -> Result<Value, Failure> {
        let current = match (self.get(r.plural, namespace, name), kind) {
            (Some(current), _) => current,
            (None, PatchKind::Apply) => {
                let mut object = patch.clone();
                object["metadata"]["name"] = json!(name);
                return self.create(r, namespace, object);
            }
            (None, _) => return Err(Self::not_found(r, name)),
        };
        let mut next = current.clone();
        match kind {
            PatchKind::Merge | PatchKind::Apply => {
                galactic_core::kube::merge_patch(&mut next, patch)
            }
            PatchKind::Json => {
                let ops: json_patch::Patch =
                    serde_json::from_value(patch.clone()).map_err(|e| {
                        Failure::new(400, "BadRequest", format!("invalid JSON patch: {e}"))
                    })?;
                json_patch::patch(&mut next, &ops)
                    .map_err(|e| Failure::new(422, "Invalid", format!("JSON patch failed: {e}")))?;
            }
        }
        self.commit(r, namespace, name, &current, next)
    }

    /// Checks the precondition carried in `next` and stores it with fresh metadata.
    fn commit(
        &mut self,
        r: &Resource,
        namespace: &str,
        name: &str,
        current: &Value,
        mut next: Value,
    ) -> Result<Value, Failure> {
        let current_rv = meta(current, "resourceVersion");
        if let Some(sent) = meta(&next, "resourceVersion") {
            if Some(&sent) != current_rv.as_ref() {
                return Err(Failure::new(409, "Conflict", format!(
                    "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    r.plural, r.group
                )));
            }
        }
        if meta(&next, "name").as_deref().is_some_and(|n| n != name) {
            return Err(Failure::new(
                400,
                "BadRequest",
                "metadata.name does not match the URL",
            ));
        }
        validate::object(r, name, &next)?;
        next["apiVersion"] = json!(r.api_version());
        next["kind"] = json!(r.kind);
        for field in ["uid", "creationTimestamp", "namespace", "name"] {
            next["metadata"][field] = current["metadata"][field].clone();
        }
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
        next["metadata"]["generation"] = json!(generation + 1);
        next["metadata"]["resourceVersion"] = json!(self.next_revision());
        self.objects.insert(
            (r.plural, namespace.to_owned(), name.to_owned()),
            next.clone(),
        );
        Ok(next)
    }

    /// Deletes an object, honouring `uid`/`resourceVersion` preconditions (409 on mismatch).
    pub fn delete(
        &mut self,
        r: &Resource,
        namespace: &str,
        name: &str,
        options: &Value,
    ) -> Result<Value, Failure> {
        let current = self.read(r, namespace, name)?;
        for (field, key) in [("uid", "uid"), ("resourceVersion", "resourceVersion")] {
            if let Some(want) = options
                .pointer(&format!("/preconditions/{key}"))
                .and_then(Value::as_str)
            {
                if meta(&current, field).as_deref() != Some(want) {
                    return Err(Failure::new(409, "Conflict", format!(
                        "Precondition failed: {field} in precondition: {want}, {field} in object meta: {}",
                        meta(&current, field).unwrap_or_default()
                    )));
                }
            }
        }
        self.revision += 1;
        self.remove(r.plural, namespace, name);
        Ok(current)
    }
}
