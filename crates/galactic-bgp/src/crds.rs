//! STATUS: do the installed CRDs have what galactic-bgp reads and writes? An older or different
//! Galactic API prunes a field it does not know on every write (the object is stored without
//! it) and refuses a value outside its enums, so a cluster missing one fails at the first ADD,
//! or worse, stores advertisements the router cannot act on.

use serde_json::Value;

/// The version galactic-bgp speaks.
const VERSION: &str = "v1alpha1";

/// Per CRD, every property galactic-bgp reads or writes (dotted, through list items), and for
/// an enum the value it writes (`path=value`).
pub const NEEDED: &[(&str, &[&str])] = &[
    (
        "bgprouters.network.datumapis.com",
        &[
            "spec.targetRef.name",
            "spec.localASN",
            "spec.srv6Locator",
            "spec.nodeID",
        ],
    ),
    (
        "bgpvrfinstances.network.datumapis.com",
        &[
            "spec.routerRef.name",
            "spec.vrfID",
            "spec.importRouteTargets.value",
            "spec.exportRouteTargets.value",
        ],
    ),
    (
        "bgpadvertisements.network.datumapis.com",
        &[
            "spec.routerRef.name",
            "spec.addressFamily.afi=l2vpn",
            "spec.addressFamily.safi=evpn",
            "spec.prefixes",
            "spec.originateFrom.type=interface",
            "spec.originateFrom.interfaceName",
            "spec.communities",
            "spec.vrfID",
            "spec.function=End.DT46",
        ],
    ),
];

/// The served `v1alpha1` schema of `crd`.
fn served_schema(crd: &Value) -> Option<&Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == VERSION && v["served"] != false)?
        .pointer("/schema/openAPIV3Schema")
}

/// The schema of `path` (dotted) under `schema`, stepping into list items.
fn property<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(schema, |node, name| {
        let node = node.get("items").unwrap_or(node);
        node.get("properties")?.get(name)
    })
}

/// What of `needed` the installed `crd` lacks, worded for a person: `version v1alpha1`,
/// `spec.originateFrom.interfaceName`, `spec.function value End.DT46`.
pub fn lacking(crd: &Value, needed: &[&str]) -> Vec<String> {
    let Some(schema) = served_schema(crd) else {
        return vec![format!("version {VERSION}")];
    };
    needed
        .iter()
        .filter_map(|need| {
            let (path, value) = need
                .split_once('=')
                .map_or((*need, None), |(p, v)| (p, Some(v)));
            let Some(node) = property(schema, path) else {
                return Some(path.to_owned());
            };
            let allowed = node.get("items").unwrap_or(node).get("enum")?.as_array()?;
            let value = value?;
            (!allowed.iter().any(|a| a == value)).then(|| format!("{path} value {value}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(name: &str) -> Value {
        galactic_kube::crds()
            .into_iter()
            .map(|(_, crd)| crd)
            .find(|crd| crd["metadata"]["name"] == name)
            .unwrap()
    }

    #[test]
    fn our_crds_have_everything_needed() {
        for (name, needed) in NEEDED {
            assert_eq!(lacking(&ours(name), needed), Vec::<String>::new(), "{name}");
        }
    }

    #[test]
    fn a_missing_property_enum_value_or_version_is_named() {
        let name = "bgpadvertisements.network.datumapis.com";
        let needed = NEEDED.iter().find(|(n, _)| *n == name).unwrap().1;
        let mut crd = ours(name);
        let spec = crd
            .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties")
            .unwrap();
        spec["originateFrom"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("interfaceName");
        spec["function"]["enum"] = serde_json::json!(["End.DT4", "End.DT6"]);
        assert_eq!(
            lacking(&crd, needed),
            [
                "spec.originateFrom.interfaceName",
                "spec.function value End.DT46"
            ]
        );
        crd["spec"]["versions"][0]["name"] = "v1beta1".into();
        assert_eq!(lacking(&crd, needed), ["version v1alpha1"]);
    }
}
