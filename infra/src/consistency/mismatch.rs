//! One disagreement between the template and the code, and how it reads.

use std::fmt;

/// One disagreement between the template and the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    NotCargoLambda {
        function: String,
    },
    NoBinary {
        function: String,
        binary: String,
    },
    NoTemplateFunction {
        binary: String,
        package: String,
    },
    NoLoader {
        function: String,
        binary: String,
    },
    LoaderFailed {
        binary: String,
        error: String,
    },
    ReadNotSet {
        function: String,
        binary: String,
        variable: String,
    },
    SetNotRead {
        function: String,
        binary: String,
        variable: String,
    },
    ValueRefused {
        function: String,
        error: String,
    },
    DirectEnvRead {
        location: String,
    },
    RouteNotServed {
        route: String,
        function: String,
    },
    RouteNotInTemplate {
        route: String,
        binary: String,
    },
    RouteTarget {
        route: String,
        template: String,
        local: String,
    },
    RouteAuth {
        route: String,
        template_public: bool,
    },
    HandlerMissesRoute {
        binary: String,
        route: String,
    },
    HandlerRouteNotInTemplate {
        binary: String,
        route: String,
    },
    UnknownTrigger {
        function: String,
        trigger: String,
    },
    NoEvent {
        function: String,
        trigger: String,
        expected: String,
    },
    EventRefused {
        file: String,
        why: String,
    },
    OrphanEvent {
        file: String,
    },
}

fn public_word(public: bool) -> &'static str {
    if public {
        "public (Authorizer: NONE)"
    } else {
        "behind the JWT authorizer"
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::NotCargoLambda { function } => write!(
                f,
                "{function}: Metadata must say BuildMethod: rust-cargolambda and BuildProperties.Binary"
            ),
            Mismatch::NoBinary { function, binary } => write!(
                f,
                "{function} builds binary {binary:?}, which no workspace crate defines"
            ),
            Mismatch::NoTemplateFunction { binary, package } => write!(
                f,
                "binary {binary:?} of function crate {package} has no AWS::Serverless::Function in template.yaml"
            ),
            Mismatch::NoLoader { function, binary } => write!(
                f,
                "{function} ({binary}): no configuration loader in seckill_infra::invoke::Function"
            ),
            Mismatch::LoaderFailed { binary, error } => {
                write!(f, "{binary}: its configuration loader failed: {error}")
            }
            Mismatch::ReadNotSet {
                function,
                binary,
                variable,
            } => write!(
                f,
                "{binary} reads {variable}, which {function} does not set (Environment or Globals)"
            ),
            Mismatch::SetNotRead {
                function,
                binary,
                variable,
            } => write!(f, "{function} sets {variable}, which {binary} never reads"),
            Mismatch::ValueRefused { function, error } => {
                write!(
                    f,
                    "{function}: the loader refuses the template's value: {error}"
                )
            }
            Mismatch::DirectEnvRead { location } => write!(
                f,
                "{location}: reads the environment directly; go through the function's config loader so the checker sees it"
            ),
            Mismatch::RouteNotServed { route, function } => write!(
                f,
                "{route} ({function}) is in template.yaml but the local gateway does not serve it"
            ),
            Mismatch::RouteNotInTemplate { route, binary } => write!(
                f,
                "{route} is served by the local gateway ({binary}) but not declared in template.yaml"
            ),
            Mismatch::RouteTarget {
                route,
                template,
                local,
            } => write!(
                f,
                "{route} goes to {template} in template.yaml but to {local} in the local gateway"
            ),
            Mismatch::RouteAuth {
                route,
                template_public,
            } => write!(
                f,
                "{route} is {} in template.yaml but {} in the local gateway",
                public_word(*template_public),
                public_word(!*template_public)
            ),
            Mismatch::HandlerMissesRoute { binary, route } => write!(
                f,
                "{route} is routed to {binary} in template.yaml but its handler does not dispatch it"
            ),
            Mismatch::HandlerRouteNotInTemplate { binary, route } => write!(
                f,
                "the {binary} handler dispatches {route}, which template.yaml does not route to it"
            ),
            Mismatch::UnknownTrigger { function, trigger } => write!(
                f,
                "{function}: trigger {trigger} is of a type the checker has no event file rule for"
            ),
            Mismatch::NoEvent {
                function,
                trigger,
                expected,
            } => write!(
                f,
                "{function}: trigger {trigger} has no event in events/: expected {expected}"
            ),
            Mismatch::EventRefused { file, why } => write!(f, "events/{file}: {why}"),
            Mismatch::OrphanEvent { file } => {
                write!(f, "events/{file} belongs to no trigger of template.yaml")
            }
        }
    }
}
