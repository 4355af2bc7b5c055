//! The resources the fixture serves.

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
    /// Whether a CustomResourceDefinition defines it (it is served only while one is stored).
    pub crd: bool,
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

/// A built-in resource.
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
        crd: false,
    }
}

/// A namespaced custom resource (served while its CRD is stored).
const fn custom(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
) -> Resource {
    Resource {
        group,
        version,
        plural,
        kind,
        namespaced: true,
        crd: true,
    }
}

/// Every resource served; any other path is a 404, as for an unregistered CRD.
pub const RESOURCES: &[Resource] = &[
    res("", "v1", "pods", "Pod", true),
    res("", "v1", "nodes", "Node", false),
    res("", "v1", "configmaps", "ConfigMap", true),
    res(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    ),
    res(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
    ),
    custom(
        galactic_kube::GROUP,
        galactic_kube::VERSION,
        "bgprouters",
        "BGPRouter",
    ),
    custom(
        galactic_kube::GROUP,
        galactic_kube::VERSION,
        "bgpvrfinstances",
        "BGPVRFInstance",
    ),
    custom(
        galactic_kube::GROUP,
        galactic_kube::VERSION,
        "bgpadvertisements",
        "BGPAdvertisement",
    ),
    custom(
        galactic_kube::GROUP,
        galactic_kube::VERSION,
        "egressshardclaims",
        "EgressShardClaim",
    ),
    custom(
        "k8s.cni.cncf.io",
        "v1",
        "network-attachment-definitions",
        "NetworkAttachmentDefinition",
    ),
];

/// The resource for a URL's group, version and plural.
pub fn resource(group: &str, version: &str, plural: &str) -> Option<Resource> {
    RESOURCES
        .iter()
        .copied()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}
