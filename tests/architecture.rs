//! The architecture's invariants (`docs/architecture.md`), read off the
//! code's own paths: which layer may name which. A path in a comment or in
//! test code (a `tests.rs`, the app's `fixture.rs`, the simulation, a
//! `#[cfg(test)]` module at the end of a file) does not count: tests may
//! reach across layers to set up what they check.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir` (or `dir` itself), but test code.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if dir.is_file() {
        found.push(dir.to_owned());
        return found;
    }
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" && name != "sim" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs")
                && name != "tests.rs"
                && !path.ends_with("shared/src/app/fixture.rs")
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The file's code lines (numbered from 1), without comments and without
/// the `#[cfg(test)]` module that ends it.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|next| next.trim_start().starts_with("mod tests {"))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = line.split(" //").next().unwrap_or(line);
        out.push((i + 1, code.to_owned()));
    }
    out
}

/// Every place under `dirs` that names one of `forbidden`, as `file:line`.
fn naming(dirs: &[&str], forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for dir in dirs {
        for file in sources(&root().join(dir)) {
            for (n, line) in code_lines(&file) {
                if let Some(name) = forbidden.iter().find(|f| line.contains(*f)) {
                    let shown = file.strip_prefix(root()).unwrap_or(&file).display();
                    found.push(format!("{shown}:{n} names {name}: {}", line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn the_domain_names_nothing_of_the_layers_above_it() {
    let found = naming(
        &["shared/src/domain"],
        &[
            "crate::app",
            "crate::adapters",
            "crate::ports",
            "crate::wire",
            "crate::observe",
            "crate::config",
            "crate::http",
            "crate::error",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_ports_name_no_use_case_and_no_adapter() {
    let found = naming(
        &["shared/src/ports.rs", "shared/src/ports"],
        &["crate::app", "crate::adapters", "crate::wire"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_use_cases_name_no_adapter_only_ports() {
    let found = naming(&["shared/src/app"], &["crate::adapters", "crate::wire"]);
    assert!(found.is_empty(), "{found:#?}");
}

/// The use cases and the domain answer values; the edge (`http/bodies`,
/// the functions) writes them as JSON. So no answer is assembled by hand
/// below the edge, and none reaches a client without a type that
/// `seckill-local openapi` describes.
#[test]
fn only_the_edge_writes_json_answers() {
    let found = naming(
        &[
            "shared/src/app",
            "shared/src/domain",
            "shared/src/ports.rs",
            "shared/src/ports",
        ],
        &["json!", "crate::http"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_adapters_name_no_use_case() {
    let found = naming(&["shared/src/adapters"], &["crate::app", "crate::wire"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn only_the_wiring_room_names_an_adapter_outside_the_adapters() {
    let found = naming(
        &[
            "shared/src/config.rs",
            "shared/src/observe",
            "shared/src/error.rs",
            "shared/src/clock.rs",
        ],
        &["crate::adapters", "crate::app", "crate::wire"],
    );
    assert!(found.is_empty(), "{found:#?}");
    // The edge: the API's bodies are written from the use cases' answers,
    // never from an adapter's types.
    let found = naming(
        &["shared/src/http.rs", "shared/src/http"],
        &["crate::adapters", "crate::wire"],
    );
    assert!(found.is_empty(), "{found:#?}");
    // The functions translate events; what they run on is wired for them.
    let found = naming(
        &["functions"],
        &["seckill_shared::adapters", "aws_sdk_", "redis::"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

/// An adapter implements its ports itself: no method of an adapter hands a
/// port's call over to an inherent method of the same type
/// (`RedisStock::load_sale(self, ..)`), which is how a port grows a second,
/// forwarding copy of every signature.
#[test]
fn the_adapters_implement_their_ports_without_forwarding() {
    let mut found = Vec::new();
    for file in sources(&root().join("shared/src/adapters")) {
        for (n, line) in code_lines(&file) {
            let forwards = line.match_indices("(self").any(|(at, _)| {
                let before = &line[..at];
                let path = before
                    .rsplit(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap_or("");
                let mut parts = path.rsplitn(2, "::");
                let (method, owner) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                let owner = owner.rsplit("::").next().unwrap_or("");
                owner.starts_with(|c: char| c.is_ascii_uppercase())
                    && method.starts_with(|c: char| c.is_ascii_lowercase())
                    && matches!(line[at + 5..].chars().next(), Some(',' | ')'))
            });
            if forwards {
                let shown = file.strip_prefix(root()).unwrap_or(&file).display();
                found.push(format!("{shown}:{n} forwards: {}", line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
