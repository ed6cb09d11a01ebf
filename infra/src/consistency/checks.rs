//! Binaries, environment and routes: what the template declares against
//! what the workspace builds, reads and serves.

use super::template::scalar;
use super::{
    Code, LAMBDA_PROVIDED, LocalRoute, Mismatch, TELEMETRY, Template, TemplateFunction,
    TriggerKind, is_local_only, reads,
};
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn check_binaries(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    let built: BTreeSet<&str> = code
        .packages
        .iter()
        .flat_map(|p| p.bins.iter().map(String::as_str))
        .collect();
    for function in template.functions.values() {
        match (&function.build_method, &function.binary) {
            (Some(method), Some(binary)) if method == "rust-cargolambda" => {
                if !built.contains(binary.as_str()) {
                    found.push(Mismatch::NoBinary {
                        function: function.logical_id.clone(),
                        binary: binary.clone(),
                    });
                }
            }
            _ => found.push(Mismatch::NotCargoLambda {
                function: function.logical_id.clone(),
            }),
        }
    }
    let deployed: BTreeSet<&str> = template
        .functions
        .values()
        .filter_map(|f| f.binary.as_deref())
        .collect();
    for package in code.packages.iter().filter(|p| p.is_function()) {
        for binary in &package.bins {
            if !deployed.contains(binary.as_str()) {
                found.push(Mismatch::NoTemplateFunction {
                    binary: binary.clone(),
                    package: package.name.clone(),
                });
            }
        }
    }
    for location in &code.direct_env_reads {
        found.push(Mismatch::DirectEnvRead {
            location: location.clone(),
        });
    }
}

/// The functions that name a binary, with it (whether or not the
/// workspace builds it: [`check_binaries`] says so once, and its routes,
/// variables and events are still the template's).
pub(super) fn deployed_functions(
    template: &Template,
) -> impl Iterator<Item = (&TemplateFunction, String)> {
    template
        .functions
        .values()
        .filter_map(|f| f.binary.clone().map(|b| (f, b)))
}

pub(super) fn check_environment(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    for (function, binary) in deployed_functions(template) {
        let id = &function.logical_id;
        let Some(&loader) = code.loaders.get(&binary) else {
            // A binary the workspace lacks is reported as such; one it
            // builds must have its loader known here.
            if code.packages.iter().any(|p| p.bins.contains(&binary)) {
                found.push(Mismatch::NoLoader {
                    function: id.clone(),
                    binary,
                });
            }
            continue;
        };
        let read = match reads(loader) {
            Ok(read) => read,
            Err(error) => {
                found.push(Mismatch::LoaderFailed { binary, error });
                continue;
            }
        };
        let unset: Vec<&String> = read
            .iter()
            .filter(|v| !function.env.contains_key(*v) && !LAMBDA_PROVIDED.contains(&v.as_str()))
            .collect();
        for variable in &unset {
            found.push(Mismatch::ReadNotSet {
                function: id.clone(),
                binary: binary.clone(),
                variable: (*variable).clone(),
            });
        }
        for variable in function.env.keys() {
            if !read.contains(variable) && !TELEMETRY.contains(&variable.as_str()) {
                found.push(Mismatch::SetNotRead {
                    function: id.clone(),
                    binary: binary.clone(),
                    variable: variable.clone(),
                });
            }
        }
        if !unset.is_empty() {
            // The loader would only refuse what is missing: said above.
            continue;
        }
        // The template's literal values through the real parsers. What
        // only CloudFormation resolves (a `Ref`, an `Fn::If`, ...) stands in
        // as `1`, as in [`reads`]: the deployer chooses parameters.
        let value_of = |name: &str| -> Option<String> {
            function
                .env
                .get(name)
                .map(|value| scalar(value).unwrap_or_else(|| "1".into()))
        };
        if let Err(err) = loader(&value_of) {
            found.push(Mismatch::ValueRefused {
                function: id.clone(),
                error: err.to_string(),
            });
        }
    }
}

pub(super) fn check_routes(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    let mut declared: BTreeMap<String, (String, String, bool)> = BTreeMap::new();
    for (function, binary) in deployed_functions(template) {
        for trigger in &function.triggers {
            if let (Some(key), TriggerKind::Http { public, .. }) =
                (trigger.route_key(), &trigger.kind)
            {
                declared.insert(key, (function.logical_id.clone(), binary.clone(), *public));
            }
        }
    }
    let served: BTreeMap<String, &LocalRoute> = code
        .routes
        .iter()
        .map(|r| (format!("{} {}", r.method, r.path), r))
        .collect();
    for (route, (function, binary, public)) in &declared {
        match served.get(route) {
            None => found.push(Mismatch::RouteNotServed {
                route: route.clone(),
                function: function.clone(),
            }),
            Some(local) => {
                if &local.function != binary {
                    found.push(Mismatch::RouteTarget {
                        route: route.clone(),
                        template: binary.clone(),
                        local: local.function.clone(),
                    });
                }
                if local.public != *public {
                    found.push(Mismatch::RouteAuth {
                        route: route.clone(),
                        template_public: *public,
                    });
                }
            }
        }
    }
    for (route, local) in &served {
        if !declared.contains_key(route) && !is_local_only(&local.method, &local.path) {
            found.push(Mismatch::RouteNotInTemplate {
                route: route.clone(),
                binary: local.function.clone(),
            });
        }
    }
    for (binary, dispatched) in &code.handler_routes {
        let dispatched: BTreeSet<&String> = dispatched.iter().collect();
        let routed: BTreeSet<&String> = declared
            .iter()
            .filter(|(_, (_, b, _))| b == binary)
            .map(|(route, _)| route)
            .collect();
        for route in routed.difference(&dispatched) {
            found.push(Mismatch::HandlerMissesRoute {
                binary: binary.clone(),
                route: (*route).clone(),
            });
        }
        for route in dispatched.difference(&routed) {
            found.push(Mismatch::HandlerRouteNotInTemplate {
                binary: binary.clone(),
                route: (*route).clone(),
            });
        }
    }
}
