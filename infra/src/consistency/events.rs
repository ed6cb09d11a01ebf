//! Each trigger's event file in `events/`: present, taken by the function's
//! own handler, and shaped like what API Gateway, the SQS event source
//! mapping or the schedule would send.

use super::checks::deployed_functions;
use super::{Code, Mismatch, Template, TriggerKind};
use crate::invoke::{Function, Handler};
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn check_events(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    let parsed: BTreeMap<&String, Option<Json>> = code
        .events
        .iter()
        .map(|(name, raw)| (name, serde_json::from_str(raw).ok()))
        .collect();
    let mut claimed = BTreeSet::new();
    for (function, binary) in deployed_functions(template) {
        let id = &function.logical_id;
        let handler = Function::parse(&binary);
        for trigger in &function.triggers {
            let mut no_event = |expected: String| {
                found.push(Mismatch::NoEvent {
                    function: id.clone(),
                    trigger: trigger.to_string(),
                    expected,
                })
            };
            match &trigger.kind {
                TriggerKind::Http {
                    method,
                    path,
                    public,
                } => {
                    let key = format!("{method} {path}");
                    let files: Vec<&String> = parsed
                        .iter()
                        .filter(|(_, json)| {
                            json.as_ref()
                                .and_then(|j| j.get("routeKey"))
                                .and_then(Json::as_str)
                                == Some(key.as_str())
                        })
                        .map(|(name, _)| *name)
                        .collect();
                    if files.is_empty() {
                        no_event(format!("an events/*.json with \"routeKey\": {key:?}"));
                    }
                    for file in files {
                        claimed.insert(file.clone());
                        let why = handler_refuses(handler, &code.events[file]).or_else(|| {
                            http_event_problem(&code.events[file], method, path, *public)
                        });
                        if let Some(why) = why {
                            found.push(Mismatch::EventRefused {
                                file: file.clone(),
                                why,
                            });
                        }
                    }
                }
                TriggerKind::Sqs => {
                    let file = format!("{binary}.json");
                    let Some(raw) = code.events.get(&file) else {
                        no_event(format!("events/{file} (an SQS batch)"));
                        continue;
                    };
                    claimed.insert(file.clone());
                    if let Some(why) =
                        handler_refuses(handler, raw).or_else(|| sqs_event_problem(raw))
                    {
                        found.push(Mismatch::EventRefused { file, why });
                    }
                }
                TriggerKind::Schedule | TriggerKind::ScheduleV2 => {
                    let file = format!("schedule-{binary}.json");
                    let Some(raw) = code.events.get(&file) else {
                        no_event(format!("events/{file} (the schedule's event)"));
                        continue;
                    };
                    claimed.insert(file.clone());
                    let schedule = format!("{id}{}", trigger.name);
                    let v2 = trigger.kind == TriggerKind::ScheduleV2;
                    if let Some(why) = handler_refuses(handler, raw)
                        .or_else(|| schedule_event_problem(raw, &schedule, v2))
                    {
                        found.push(Mismatch::EventRefused { file, why });
                    }
                }
                TriggerKind::Other(_) => found.push(Mismatch::UnknownTrigger {
                    function: id.clone(),
                    trigger: trigger.to_string(),
                }),
            }
        }
    }
    for file in code.events.keys() {
        if !claimed.contains(file) {
            found.push(Mismatch::OrphanEvent { file: file.clone() });
        }
    }
}

/// Why the function's handler cannot take `raw` (its own event type).
fn handler_refuses(handler: Option<Function>, raw: &str) -> Option<String> {
    match handler {
        Some(function) => function.parse_event(raw).err().map(|e| e.to_string()),
        None => Some("no handler is known for this function".into()),
    }
}

/// What API Gateway would have put in the event for this route that the
/// file does not: the route key, method and path, path parameters, and the
/// JWT authorizer's claims exactly when the route is behind it.
fn http_event_problem(raw: &str, method: &str, path: &str, public: bool) -> Option<String> {
    let event: Json = serde_json::from_str(raw).ok()?;
    let key = format!("{method} {path}");
    let field = |pointer: &str| event.pointer(pointer).and_then(Json::as_str);
    if field("/version") != Some("2.0") {
        return Some("not a payload 2.0 event (\"version\": \"2.0\")".into());
    }
    if field("/requestContext/routeKey") != Some(key.as_str()) {
        return Some(format!("requestContext.routeKey is not {key:?}"));
    }
    if field("/requestContext/http/method") != Some(method) {
        return Some(format!("requestContext.http.method is not {method:?}"));
    }
    let raw_path = field("/rawPath").unwrap_or_default();
    if field("/requestContext/http/path") != Some(raw_path) {
        return Some("requestContext.http.path differs from rawPath".into());
    }
    let Some(params) = match_path(path, raw_path) else {
        return Some(format!("rawPath {raw_path:?} does not match {path}"));
    };
    let given: BTreeMap<String, String> = event
        .get("pathParameters")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    if given != params {
        return Some(format!(
            "pathParameters {given:?} are not those of rawPath {params:?}"
        ));
    }
    let has_claims = event
        .pointer("/requestContext/authorizer/jwt/claims/sub")
        .is_some();
    match (public, has_claims) {
        (false, false) => Some(
            "the route is behind the JWT authorizer but requestContext.authorizer.jwt.claims.sub is missing"
                .into(),
        ),
        (true, true) => Some("the route is public but the event carries JWT claims".into()),
        _ => None,
    }
}

/// The path parameters of `path` against the template pattern, or `None`.
fn match_path(pattern: &str, path: &str) -> Option<BTreeMap<String, String>> {
    let want: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
    let got: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if want.len() != got.len() {
        return None;
    }
    let mut params = BTreeMap::new();
    for (w, g) in want.iter().zip(&got) {
        match w.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
            Some(name) if !g.is_empty() => {
                params.insert(name.to_owned(), (*g).to_owned());
            }
            Some(_) => return None,
            None if w == g => {}
            None => return None,
        }
    }
    Some(params)
}

/// An SQS batch as the event source mapping delivers it: records with a
/// message id (the order-writer reports failures by it) from `aws:sqs`.
fn sqs_event_problem(raw: &str) -> Option<String> {
    let event: Json = serde_json::from_str(raw).ok()?;
    let records = event.get("Records").and_then(Json::as_array)?;
    if records.is_empty() {
        return Some("the batch has no records".into());
    }
    records.iter().enumerate().find_map(|(i, r)| {
        if r.get("messageId").and_then(Json::as_str).is_none() {
            Some(format!("record {i} has no messageId"))
        } else if r.get("eventSource").and_then(Json::as_str) != Some("aws:sqs") {
            Some(format!("record {i} is not from aws:sqs"))
        } else {
            None
        }
    })
}

/// The envelope a schedule sends: a `Scheduled Event` from EventBridge
/// Scheduler (`ScheduleV2`) or an EventBridge rule (`Schedule`), naming the
/// schedule SAM creates for this trigger (`<Function><Event>`).
fn schedule_event_problem(raw: &str, schedule: &str, v2: bool) -> Option<String> {
    let event: EventBridgeEvent = match serde_json::from_str(raw) {
        Ok(event) => event,
        Err(err) => return Some(format!("not an EventBridge event: {err}")),
    };
    let (source, arn) = if v2 {
        ("aws.scheduler", ":scheduler:")
    } else {
        ("aws.events", ":events:")
    };
    if event.detail_type != "Scheduled Event" {
        return Some("detail-type is not \"Scheduled Event\"".into());
    }
    if event.source != source {
        return Some(format!("source is not {source:?}"));
    }
    let names_it = event
        .resources
        .iter()
        .flatten()
        .any(|r| r.contains(arn) && r.contains(schedule));
    if !names_it {
        return Some(format!(
            "resources do not name this trigger's schedule ({arn} ARN containing {schedule})"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_patterns_match_like_api_gateway() {
        let params = match_path("/sales/{saleId}/purchase", "/sales/s1/purchase").unwrap();
        assert_eq!(params["saleId"], "s1");
        assert!(match_path("/sales/{saleId}", "/sales//").is_none());
        assert!(match_path("/sales/{saleId}", "/sales/").is_none());
        assert!(match_path("/health", "/health").unwrap().is_empty());
        assert!(match_path("/health", "/healthz").is_none());
    }
}
