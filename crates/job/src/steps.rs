//! What every step of a job shares, so that the steps (disk.rs, net.rs) and
//! the job that strings them together (main_job.rs) import it from one place
//! below them all: where a step's progress goes, and how goals are held
//! against what it measured. Measures nothing itself.

use headroom_analysis::{evaluate, Analysis, Goal, GoalResult};
use headroom_result::{ResultDoc, Warning, WarningCode};
use headroom_runner::{Plan, Sink};

/// Where the progress of each step goes: a sink per plan (progress bars).
pub type StepSinks<'a> = dyn FnMut(&Plan) -> Box<dyn Sink> + 'a;

/// Holds `goals` against `doc` (its verdict when analysed, else its best
/// probes); every missed goal also becomes a warning in the document.
pub fn hold_goals(doc: &mut ResultDoc, goals: &[Goal], analysis: Option<&Analysis>) -> Vec<GoalResult> {
    let results: Vec<GoalResult> = evaluate(goals, doc, analysis);
    warn_missed(doc, &results);
    results
}

/// A `goal_missed` warning in `doc` for every goal of `results` not met.
pub(crate) fn warn_missed(doc: &mut ResultDoc, results: &[GoalResult]) {
    for g in results.iter().filter(|g| !g.met) {
        doc.warnings.push(Warning::new(WarningCode::GoalMissed, format!("goal {} missed", g.goal)));
    }
}
