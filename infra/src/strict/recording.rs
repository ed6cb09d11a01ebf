//! The SQS calls the layer serves itself, recorded as the emulator records
//! the calls it serves (one JSON object a line: `headers`, `body` in base64
//! with `body_encoded`, `method`, `url`), so the IAM test, which reads the
//! emulator's recording, sees every call a function made.
//!
//! Two ways to read them: the emulator's recorder API through the layer
//! (`/moto-api/recorder/...`: start, stop and reset apply to both, and a
//! download has the layer's lines after the emulator's), and a file the
//! layer appends to from the start (`STRICT_RECORD_FILE`, what `make test`
//! reads after the suite).

use base64::Engine;
use hyper::body::Bytes;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

#[derive(Default)]
struct Lines {
    on: bool,
    kept: Vec<String>,
}

pub(super) struct Recorder {
    lines: Mutex<Lines>,
    file: Option<Mutex<std::fs::File>>,
}

impl Recorder {
    /// Recording from the start into `file`, if given (else only once the
    /// recorder API starts it).
    pub(super) fn new(file: Option<PathBuf>) -> Self {
        let file = file.and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|err| tracing::warn!(path = %path.display(), %err, "strict: cannot record SQS calls there"))
                .ok()
        });
        Self {
            lines: Mutex::new(Lines {
                on: file.is_some(),
                kept: Vec::new(),
            }),
            file: file.map(Mutex::new),
        }
    }

    fn lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records one call served here, when recording.
    pub(super) fn record(&self, parts: &hyper::http::request::Parts, body: &Bytes) {
        let mut lines = self.lines();
        if !lines.on {
            return;
        }
        let headers: serde_json::Map<String, serde_json::Value> = parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.to_string(), v.to_str().ok()?.into())))
            .collect();
        let line = serde_json::json!({
            "headers": headers,
            "method": parts.method.as_str(),
            "url": parts.uri.to_string(),
            "body": base64::engine::general_purpose::STANDARD.encode(body),
            "body_encoded": true,
        })
        .to_string();
        if let Some(file) = &self.file {
            let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(err) = writeln!(file, "{line}") {
                tracing::warn!(%err, "strict: could not record an SQS call");
            }
        }
        lines.kept.push(line);
    }

    /// The emulator's recorder `action` (its answer `body`) applied here
    /// too; a download's answer gets the lines kept here.
    pub(super) fn apply(&self, action: &str, body: Bytes) -> Bytes {
        let mut lines = self.lines();
        match action {
            "start-recording" => lines.on = true,
            "stop-recording" => lines.on = false,
            "reset-recording" => lines.kept.clear(),
            "download-recording" if !lines.kept.is_empty() => {
                let mut joined = body.to_vec();
                if !joined.is_empty() && !joined.ends_with(b"\n") {
                    joined.push(b'\n');
                }
                for line in &lines.kept {
                    joined.extend_from_slice(line.as_bytes());
                    joined.push(b'\n');
                }
                return Bytes::from(joined);
            }
            _ => {}
        }
        body
    }
}
