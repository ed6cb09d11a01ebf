//! The plan as text.

use super::*;

// ------------------------------------------------------------ rendering

/// An integer with thousands separators.
pub(super) fn int(x: f64) -> String {
    let rounded = x.round();
    let negative = rounded < 0.0;
    let digits = format!("{:.0}", rounded.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if negative { format!("-{out}") } else { out }
}

/// A figure: whole from 100 up, else with what decimals it needs.
pub(super) fn num(x: f64) -> String {
    if x.abs() >= 100.0 || x.fract() == 0.0 {
        int(x)
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

pub(super) fn secs(x: f64) -> String {
    if x >= 120.0 {
        format!(
            "{} s ({} min)",
            int(x),
            num((x / 60.0 * 10.0).round() / 10.0)
        )
    } else {
        format!("{} s", num(x))
    }
}

pub(super) fn pct(x: f64) -> String {
    format!("{}%", int(x * 100.0))
}

pub(super) fn usd(x: f64) -> String {
    if x > 0.0 && x < 0.001 {
        "<$0.001".to_owned()
    } else if x >= 100.0 {
        format!("${}", int(x))
    } else if x >= 1.0 {
        format!("${x:.2}")
    } else {
        format!("${x:.3}")
    }
}

/// Prose at most [`WRAP`] columns wide, words kept whole: the first line
/// starts with `first`, the others with `indent`.
pub(super) const WRAP: usize = 100;

pub(super) fn wrapped(
    f: &mut fmt::Formatter<'_>,
    first: &str,
    text: &str,
    indent: &str,
) -> fmt::Result {
    let mut line = first.to_owned();
    let mut words_on_line = 0;
    for word in text.split_whitespace() {
        let width = line.chars().count() + 1 + word.chars().count();
        if words_on_line > 0 && width > WRAP {
            writeln!(f, "{line}")?;
            line = indent.to_owned();
            words_on_line = 0;
        }
        if words_on_line > 0 {
            line.push(' ');
        }
        line.push_str(word);
        words_on_line += 1;
    }
    writeln!(f, "{line}")
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = &self.input;
        let mode = if input.is_lottery() {
            format!(
                "lottery window {} s, every buyer enters once",
                input.lottery_window_secs
            )
        } else {
            "first come, first served".to_owned()
        };
        writeln!(f, "Plan {}: {mode}", input.name)?;
        let arrival = match input.peak_rps {
            Some(peak) => format!("a peak of {} purchases/s given", int(peak)),
            None if input.is_lottery() => {
                format!("{} buyers over the window", int(input.buyers as f64))
            }
            None => format!(
                "{} buyers x {} attempts, most within {} s of the opening",
                int(input.buyers as f64),
                num(input.attempts_per_buyer),
                num(input.arrival_secs)
            ),
        };
        writeln!(
            f,
            "{} units; {arrival}; payment window {} s, {} paid",
            int(input.units as f64),
            input.payment_window_secs,
            pct(input.paid_fraction)
        )?;
        writeln!(f)?;

        let header = Row {
            item: String::new(),
            need: "need".into(),
            default: "default or limit".into(),
            verdict: None,
        };
        let width = |get: fn(&Row) -> usize| {
            self.rows
                .iter()
                .chain(std::iter::once(&header))
                .map(get)
                .max()
                .unwrap_or(0)
        };
        let w_item = width(|r| r.item.chars().count());
        let w_need = width(|r| r.need.chars().count());
        let w_default = width(|r| r.default.chars().count());
        let line = |f: &mut fmt::Formatter<'_>, r: &Row, verdict: &str| {
            let text = format!(
                "{:<w_item$}  {:>w_need$}  {:>w_default$}  {verdict}",
                r.item, r.need, r.default
            );
            writeln!(f, "{}", text.trim_end())
        };
        line(f, &header, "verdict")?;
        for r in &self.rows {
            let verdict = r.verdict.map(|v| v.to_string()).unwrap_or_default();
            line(f, r, &verdict)?;
        }
        writeln!(f)?;

        let d = &self.drain;
        let drain = format!(
            "Drain: {} orders at {} writers x {} orders / {} ms = {} orders/s: {} from the first accepted (target {}, a tenth of the payment window).",
            int(d.orders),
            d.writers,
            BATCH_SIZE,
            num(input.writer_batch_ms),
            int(d.rate),
            secs(d.secs),
            secs(d.target_secs)
        );
        wrapped(f, "", &drain, "")?;
        let e = &self.expiry;
        let expiry = format!(
            "Expiry: {} unpaid orders; release-unpaid runs every minute for {} s, {} chunks of {} ({} DynamoDB queries, then the chunk released together, {} expiries to a transaction, at {} ms) = {} a run, {}/s: the last released {} after the first payment window closes.",
            int(e.unpaid),
            RELEASE_RUN_SECS,
            int(e.chunks_per_run),
            RELEASE_CHUNK,
            SALE_BUCKETS,
            EXPIRE_BATCH,
            num(input.release_chunk_ms),
            int(e.per_run),
            num(e.rate),
            secs(e.secs)
        );
        wrapped(f, "", &expiry, "")?;
        if let Some(draw) = &self.draw {
            let text = format!(
                "Draw: {} tickets in {} chunks at {} ms, plus the winners' sends: about {} after the window.",
                int(draw.holders),
                int(draw.chunks),
                num(input.draw_chunk_ms),
                secs(draw.secs)
            );
            wrapped(f, "", &text, "")?;
        }
        writeln!(f)?;

        writeln!(f, "Quota requests to file:")?;
        if self.quota_requests.is_empty() {
            writeln!(f, "  none")?;
        }
        for q in &self.quota_requests {
            let unit = if q.unit.is_empty() {
                String::new()
            } else {
                format!(" {}", q.unit)
            };
            writeln!(f, "  - {}: {}{unit}", q.quota, int(q.value as f64))?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "The sale's definition: \"shards\": {}",
            self.redis.sale_shards
        )?;
        writeln!(f, "{}", self.deploy_line())?;
        writeln!(f)?;

        writeln!(
            f,
            "Cost of the sale's hour (us-east-1 list prices, docs/operations.md \"Costs\"):"
        )?;
        let w_cost_item = self.costs.iter().map(|c| c.item.len()).max().unwrap_or(0);
        let amounts: Vec<String> = self.costs.iter().map(|c| usd(c.dollars)).collect();
        let total = usd(self.total_cost());
        let w_amount = amounts
            .iter()
            .map(String::len)
            .chain(std::iter::once(total.len()))
            .max()
            .unwrap_or(0);
        for (c, amount) in self.costs.iter().zip(&amounts) {
            writeln!(
                f,
                "  {:<w_cost_item$}  {amount:>w_amount$}  {}",
                c.item, c.arithmetic
            )?;
        }
        writeln!(f, "  {:<w_cost_item$}  {total:>w_amount$}", "total")?;
        writeln!(f)?;

        writeln!(f, "Notes:")?;
        for note in &self.notes {
            wrapped(f, "  - ", note, "    ")?;
        }
        Ok(())
    }
}
