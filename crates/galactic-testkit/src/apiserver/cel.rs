//! A CRD's `x-kubernetes-validations` rules, evaluated by a real CEL interpreter (the `cel`
//! crate) with the Kubernetes CEL libraries (`kube-cel`: `isCIDR`, string `split`, `matches`,
//! lists, …), with `oldSelf` bound on updates; each failed rule is a field error worded as the
//! API server words it (`<path>: Invalid value: "<type>": <message>`).

use super::failure::{ErrorKind, FieldError};
use super::schema;
use serde_json::Value;
use std::sync::{Mutex, OnceLock};

/// One interpreter for the process: building it registers every library function.
fn validator() -> &'static Mutex<kube_cel::Validator> {
    static VALIDATOR: OnceLock<Mutex<kube_cel::Validator>> = OnceLock::new();
    VALIDATOR.get_or_init(|| Mutex::new(kube_cel::Validator::new()))
}

/// Every failed rule of `root` (the CRD version's `openAPIV3Schema`) for `object`, with `old`
/// the stored object on an update (transition rules run only then).
pub fn validate(root: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let validator = validator().lock().unwrap_or_else(|p| p.into_inner());
    match validator.validate(root, object, old) {
        Ok(()) => Vec::new(),
        Err(failures) => failures
            .iter()
            .map(|failure| {
                let field = failure.field_path.clone();
                let type_name = schema::at(root, &field)
                    .and_then(|s| s["type"].as_str())
                    .unwrap_or("object");
                let kind = failure
                    .reason
                    .as_deref()
                    .map_or(ErrorKind::Invalid, ErrorKind::from_cause);
                let message = match failure.kind {
                    kube_cel::ErrorKind::ValidationFailure => failure.message.clone(),
                    // A rule that does not evaluate fails closed, as the server's would.
                    _ => format!(
                        "rule {:?} did not evaluate: {}",
                        failure.rule, failure.message
                    ),
                };
                FieldError::rule(&field, kind, type_name, &message)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use kube_cel::cel::{Context, Program, Value};
    use kube_cel::KubeCelExt;

    /// `expr` evaluated with the Kubernetes libraries.
    fn eval(expr: &str) -> Value {
        let ctx = Context::default().with_all();
        Program::compile(expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .execute(&ctx)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    fn truth(expr: &str) -> bool {
        match eval(expr) {
            Value::Bool(b) => b,
            other => panic!("{expr}: {other:?}"),
        }
    }

    /// The library functions and macros the Galactic API's rules use, with the Kubernetes
    /// semantics those rules rely on.
    #[test]
    fn the_functions_the_galactic_rules_use_behave_as_in_kubernetes() {
        // isCIDR: an address, a slash and a length in range; host bits may be set.
        for cidr in [
            "2001:db8:ff03::/48",
            "fd20:60::/64",
            "10.0.0.0/8",
            "2001:db8::1/64",
            "::/0",
        ] {
            assert!(truth(&format!("isCIDR('{cidr}')")), "{cidr}");
        }
        for bad in [
            "2001:db8::",
            "10.0.0.0/33",
            "fd00::/129",
            "nope",
            "",
            "2001:db8::zz/64",
        ] {
            assert!(!truth(&format!("isCIDR('{bad}')")), "{bad}");
        }
        // split: every separator, empty pieces kept; indexing.
        assert!(truth("'fd00::/64'.split('/') == ['fd00::', '64']"));
        assert!(truth("'a//b'.split('/').size() == 3"));
        assert!(truth("'fd00::/48'.split('/')[1] == '48'"));
        // contains, matches (RE2, unanchored unless the pattern anchors), the macros.
        assert!(truth(
            "'fd00::/64'.contains(':') && !'10.0.0.0/8'.contains(':')"
        ));
        assert!(truth("'x65000:1'.matches('[0-9]+:[0-9]+')"));
        assert!(!truth("'x65000:1'.matches('^[0-9]+:[0-9]+$')"));
        assert!(truth(
            r"'1.2.3.4:5'.matches('^[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}:[0-9]{1,10}$')"
        ));
        assert!(!truth(
            r"'1x2.3.4:5'.matches('^[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}:[0-9]{1,10}$')"
        ));
        assert!(truth(
            "['65000:1', '1.2.3.4:5'].all(c, c.matches('^[0-9.]+:[0-9]+$'))"
        ));
        assert!(!truth(
            "['65000:1', 'x'].all(c, c.matches('^[0-9.]+:[0-9]+$'))"
        ));
        assert!(truth("{'a': 1}.a == 1 ? true : false"));
        assert!(truth(
            "has({'prefixes': []}.prefixes) && {'prefixes': []}.prefixes.size() == 0"
        ));
        assert!(!truth("has({'a': 1}.b)"));
    }
}
