//! The third table: the fairness figure of the opening second,
//! first come first served against a lottery window of 3 s and of 1 s,
//! side by side (`seckill_infra::fairness`: the scenario, the run, the
//! invariants it checks).

use crate::{Bench, BoxError};
use seckill_infra::fairness::{Figures, Mode, Scenario, TARGET_POINTS, run};

/// The runs, in the order they run and the table shows them. W = 1 is
/// shorter than the people's 3 s of arrivals: what such a window does.
const MODES: [Mode; 3] = [Mode::Fcfs, Mode::Window(3), Mode::Window(1)];

/// Runs the three modes on this Redis and prints the table; a run whose
/// invariants broke is a failure of the bench.
pub(crate) async fn fairness_table(bench: &mut Bench) -> Result<(), BoxError> {
    let scenario = Scenario::default();
    println!();
    println!(
        "fairness at the opening second: {} units, 1 per buyer; {} scripts firing within {} ms of the start (a 425 or 503 DRAWING retried after {} ms), {} people arriving uniformly over the first {} s (retried after the Retry-After); the real purchase path in-process on this Redis, no gate",
        scenario.units,
        scenario.scripts,
        scenario.script_spread.as_millis(),
        scenario.script_retry.as_millis(),
        scenario.people,
        scenario.people_spread.as_secs(),
    );
    println!(
        "target with the window: people's share of units within {TARGET_POINTS} points of their share of tickets"
    );
    let mut runs: Vec<(Mode, Option<Figures>)> = Vec::new();
    for mode in MODES {
        let sale = match mode {
            Mode::Fcfs => format!("{}-fair-fcfs", bench.tag),
            Mode::Window(w) => format!("{}-fair-w{w}", bench.tag),
        };
        match run(&bench.redis_url, &sale, &scenario, mode).await {
            Ok(figures) => runs.push((mode, Some(figures))),
            Err(err) => {
                bench
                    .failures
                    .push(format!("fairness, {}: {err}", mode.label()));
                runs.push((mode, None));
            }
        }
    }
    print_table(&scenario, &runs);
    Ok(())
}

fn print_table(scenario: &Scenario, runs: &[(Mode, Option<Figures>)]) {
    let all = f64::from(scenario.people) * 100.0 / f64::from(scenario.people + scenario.scripts);
    let line = |label: &str, cell: &dyn Fn(&Figures) -> String| {
        let cells: String = runs
            .iter()
            .map(|(_, f)| format!("{:>14}", f.as_ref().map_or_else(|| "FAILED".into(), cell)))
            .collect();
        println!("  {label:<44}{cells}");
    };
    println!();
    let heads: String = runs
        .iter()
        .map(|(mode, _)| format!("{:>14}", mode.label()))
        .collect();
    println!("  {:<44}{heads}", "");
    line("units won by people", &|f| f.people_units.to_string());
    line("units won by scripts", &|f| f.script_units.to_string());
    line("people's share of units", &|f| {
        format!("{:.1}%", f.people_share_units())
    });
    line("people's share of ticket holders (a)", &|f| {
        format!("{:.1}%", f.people_share_in())
    });
    line("gap (points)", &|f| format!("{:+.1}", f.gap_points()));
    line("people's share of all buyers", &|_| format!("{all:.1}%"));
    line("peak purchases/s Redis saw (b)", &|f| {
        format!("{:.0}", f.peak_per_sec)
    });
    line("start to sold out, ms (Redis's clock)", &|f| {
        f.sold_out_after_ms.to_string()
    });
    println!(
        "  (a) FCFS: of every buyer (all arrived within the first {} s); a window: of the buyers holding a ticket",
        scenario.people_spread.as_secs()
    );
    println!(
        "  (b) the largest rise of INFO commandstats' EVALSHA calls over a {} ms sample, per second (every purchase is one call; the draw adds one per 100 tickets)",
        seckill_infra::fairness::SAMPLE_EVERY.as_millis()
    );
    for (mode, figures) in runs {
        let Some(f) = figures else { continue };
        let verdict = match mode {
            Mode::Fcfs => String::new(),
            Mode::Window(_) if f.gap_points().abs() <= TARGET_POINTS => ": target met".into(),
            Mode::Window(_) => ": target MISSED".into(),
        };
        let draw = f
            .draw_ms
            .map_or(String::new(), |ms| format!(", the draw took {ms} ms"));
        println!(
            "  {}{verdict}: {} orders, {} tickets, {} sold out, {} answers retried{draw}; invariants hold (stock 0, {} units reserved, nobody over the limit, every WON ticket reserved, every reservation a WON ticket's or an accepted purchase's)",
            mode.label(),
            f.answers.orders,
            f.answers.tickets,
            f.answers.sold_out,
            f.answers.retried,
            f.units,
        );
    }
}
