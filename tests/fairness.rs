//! The fairness figure at full size, through the
//! real purchase path on the real Redis (`seckill_infra::fairness`): 1,000
//! units, 2,000 scripts firing within 5 ms of the start, 20,000 people over
//! the first 3 s. With a 3 s lottery window, people's share of the units is
//! their share of the tickets within the 5 points (its standard
//! deviation is about 0.9 points at 1,000 units); first come first served,
//! the scripts take more than half. Every run checks the invariants itself
//! and fails on a broken one. (Drawn in arrival order instead of the
//! seed's, by a temporary change to `draw_order.lua`, the window run
//! failed: people won 40 units, 86.9 points under their share of the
//! tickets.)

use seckill_infra::fairness::{Figures, Mode, Scenario, TARGET_POINTS, run};
use seckill_tests::unique;

fn redis_url() -> String {
    std::env::var("REDIS_URL").expect("REDIS_URL (make test sets it)")
}

fn said(f: &Figures) -> String {
    format!(
        "{}: people {} / scripts {} units; people {:.1}% of units, {:.1}% of the {} buyers in ({} people); gap {:+.1} points; {:?}",
        f.mode.label(),
        f.people_units,
        f.script_units,
        f.people_share_units(),
        f.people_share_in(),
        f.people_in + f.scripts_in,
        f.people_in,
        f.gap_points(),
        f.answers,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_window_people_win_their_share_of_the_tickets_and_without_it_scripts_win() {
    let scenario = Scenario::default();
    let url = redis_url();

    let window = run(&url, &unique("fair-w3"), &scenario, Mode::Window(3))
        .await
        .unwrap_or_else(|err| panic!("window run: {err}"));
    println!("{}", said(&window));
    assert_eq!(window.people_units + window.script_units, 1_000);
    // Who holds a ticket depends on the machine's pace (Redis's clock
    // closes the window: on a quiet machine about 10 people of its last
    // milliseconds miss it, on a loaded one thousands, and they are
    // answered DRAWING, then SOLD_OUT). What must hold at any pace: each
    // holder has one ticket, and people win their share of the holders.
    // The run tells a slow machine (too few holders to draw from) from a
    // wrong draw.
    assert_eq!(
        window.answers.tickets,
        window.people_in + window.scripts_in,
        "{}",
        said(&window)
    );
    assert!(
        window.people_in >= u64::from(scenario.units) && window.scripts_in > 0,
        "too slow a machine for this scenario, not a wrong answer: only {} people and {} scripts \
         reached Redis inside the 3 s window ({})",
        window.people_in,
        window.scripts_in,
        said(&window)
    );
    assert!(
        window.gap_points().abs() <= TARGET_POINTS,
        "the draw is not fair to the holders: {}",
        said(&window)
    );

    let fcfs = run(&url, &unique("fair-fcfs"), &scenario, Mode::Fcfs)
        .await
        .unwrap_or_else(|err| panic!("FCFS run: {err}"));
    println!("{}", said(&fcfs));
    assert_eq!(fcfs.people_units + fcfs.script_units, 1_000);
    assert_eq!(fcfs.answers.orders, 1_000, "{}", said(&fcfs));
    assert_eq!(fcfs.answers.tickets, 0);
    assert!(fcfs.script_units > 500, "{}", said(&fcfs));
}
