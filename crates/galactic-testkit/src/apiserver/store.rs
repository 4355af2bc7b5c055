//! The fixture's object store and the API semantics of each verb.
//!
//! A CRD-backed resource is served only while its CRD (a stored
//! `apiextensions.k8s.io/v1` CustomResourceDefinition) serves the version: every write is then
//! pruned, defaulted and validated by that CRD's schema and CEL rules, and with a status
//! subresource a write of the main resource keeps the stored `status` while a write of
//! `/status` changes nothing else. `metadata.generation` counts changes outside metadata (and
//! outside status, with the subresource); a write that changes nothing keeps the object and its
//! resourceVersion.

pub use super::failure::Failure;
pub use super::resources::{resource, Resource, RESOURCES};
use super::validate::{self, Served};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

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

    /// The CRD serving `r`: `None` for a built-in resource, 404 while no stored CRD serves the
    /// version (as for an unregistered resource).
    pub fn served(&self, r: &Resource) -> Result<Option<Served>, Failure> {
        if !r.crd {
            return Ok(None);
        }
        let name = format!("{}.{}", r.plural, r.group);
        self.get("customresourcedefinitions", "", &name)
            .and_then(|crd| Served::of(&crd, r.version))
            .map(Some)
            .ok_or_else(|| {
                Failure::new(
                    404,
                    "NotFound",
                    format!(
                        "the server could not find the requested resource ({}/{} {})",
                        r.group, r.version, r.plural
                    ),
                )
            })
    }

    /// Stores an object as `kubectl create` would (strict field validation: a field the schema
    /// does not have is a 400, not pruned; then defaulted, validated, metadata stamped) but
    /// keeping its `status`, for seeding; its `apiVersion` and `kind` pick the resource.
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
        let served = self.served(&r)?;
        if let Some(served) = &served {
            let unknown = validate::unknown_fields(served, &object);
            if !unknown.is_empty() {
                return Err(Failure::unknown_fields(r.kind, r.version, &unknown));
            }
        }
        validate::admit(&r, served.as_ref(), &name, &mut object, None)?;
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

    /// Lists objects of `r` (404 while its CRD is not installed).
    pub fn list_served(
        &self,
        r: &Resource,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, Failure> {
        self.served(r)?;
        Ok(self.list(r.plural, namespace))
    }

    /// Reads an object (404 when absent, or while its CRD is not installed).
    pub fn read(&self, r: &Resource, namespace: &str, name: &str) -> Result<Value, Failure> {
        self.served(r)?;
        self.get(r.plural, namespace, name)
            .ok_or_else(|| Self::not_found(r, name))
    }

    /// Creates an object (409 AlreadyExists, 422 Invalid); with a status subresource the
    /// object's `status` is dropped.
    pub fn create(
        &mut self,
        r: &Resource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, Failure> {
        let served = self.served(r)?;
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
        if served.as_ref().is_some_and(|s| s.status_subresource) {
            if let Some(fields) = object.as_object_mut() {
                fields.remove("status");
            }
        }
        validate::admit(r, served.as_ref(), &name, &mut object, None)?;
        self.stamp_new(r, namespace, &mut object);
        self.objects
            .insert((r.plural, namespace.to_owned(), name), object.clone());
        Ok(object)
    }

    /// Replaces an object (PUT) or its status (PUT `/status`): 404, 409 on a stale
    /// resourceVersion, 422.
    pub fn replace(
        &mut self,
        r: &Resource,
        target: (&str, &str, Part),
        object: Value,
    ) -> Result<Value, Failure> {
        let (namespace, name, part) = target;
        let current = self.read(r, namespace, name)?;
        self.commit(r, namespace, name, part, &current, object)
    }

    /// Patches an object or its status; an apply patch of an absent object creates it.
    pub fn patch(
        &mut self,
        r: &Resource,
        target: (&str, &str, Part),
        kind: PatchKind,
        patch: &Value,
    ) -> Result<Value, Failure> {
        let (namespace, name, part) = target;
        self.served(r)?;
        let current = match (self.get(r.plural, namespace, name), kind, part) {
            (Some(current), _, _) => current,
            (None, PatchKind::Apply, Part::Main) => {
                let mut object = patch.clone();
                object["metadata"]["name"] = json!(name);
                return self.create(r, namespace, object);
            }
            (None, _, _) => return Err(Self::not_found(r, name)),
        };
        let mut next = current.clone();
        match kind {
            PatchKind::Merge | PatchKind::Apply => galactic_kube::merge_patch(&mut next, patch),
            PatchKind::Json => {
                let ops: json_patch::Patch =
                    serde_json::from_value(patch.clone()).map_err(|e| {
                        Failure::new(400, "BadRequest", format!("invalid JSON patch: {e}"))
                    })?;
                json_patch::patch(&mut next, &ops)
                    .map_err(|e| Failure::new(422, "Invalid", format!("JSON patch failed: {e}")))?;
            }
        }
        self.commit(r, namespace, name, part, &current, next)
    }

    /// What a write of `part` makes of `current`: the main resource keeps the stored status
    /// (with the subresource), `/status` takes nothing but the status.
    fn merge_part(
        served: Option<&Served>,
        part: Part,
        current: &Value,
        mut next: Value,
    ) -> Result<Value, Failure> {
        let subresource = served.is_some_and(|s| s.status_subresource);
        match part {
            Part::Status if !subresource => Err(Failure::new(
                404,
                "NotFound",
                "the resource has no status subresource",
            )),
            Part::Status => {
                let mut merged = current.clone();
                merged["metadata"]["resourceVersion"] = next["metadata"]["resourceVersion"].clone();
                match next.get("status") {
                    Some(status) => merged["status"] = status.clone(),
                    None => {
                        if let Some(fields) = merged.as_object_mut() {
                            fields.remove("status");
                        }
                    }
                }
                Ok(merged)
            }
            Part::Main if subresource => {
                match current.get("status") {
                    Some(status) => next["status"] = status.clone(),
                    None => {
                        if let Some(fields) = next.as_object_mut() {
                            fields.remove("status");
                        }
                    }
                }
                Ok(next)
            }
            Part::Main => Ok(next),
        }
    }

    /// Checks the precondition carried in `next` and stores it with fresh metadata.
    fn commit(
        &mut self,
        r: &Resource,
        namespace: &str,
        name: &str,
        part: Part,
        current: &Value,
        next: Value,
    ) -> Result<Value, Failure> {
        let served = self.served(r)?;
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
        let mut next = Self::merge_part(served.as_ref(), part, current, next)?;
        validate::admit(r, served.as_ref(), name, &mut next, Some(current))?;
        next["apiVersion"] = json!(r.api_version());
        next["kind"] = json!(r.kind);
        for field in [
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "generation",
            "resourceVersion",
        ] {
            next["metadata"][field] = current["metadata"][field].clone();
        }
        if r.namespaced {
            next["metadata"]["namespace"] = json!(namespace);
        }
        if next == *current {
            // Nothing changed: the server writes nothing and keeps the resourceVersion.
            return Ok(next);
        }
        let subresource = served.as_ref().is_some_and(|s| s.status_subresource);
        if content(&next, subresource) != content(current, subresource) {
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
            next["metadata"]["generation"] = json!(generation + 1);
        }
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

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The object (`.../name`).
    Main,
    /// Its status subresource (`.../name/status`).
    Status,
}

/// What `metadata.generation` counts changes of: everything but metadata (and status, when it
/// is a subresource).
fn content(object: &Value, status_subresource: bool) -> Value {
    let mut content = object.clone();
    if let Some(fields) = content.as_object_mut() {
        fields.remove("metadata");
        if status_subresource {
            fields.remove("status");
        }
    }
    content
}
