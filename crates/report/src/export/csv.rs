//! CSV for spreadsheets: tidy rows of raw numbers. A comparison gives one row
//! per figure and result; otherwise one row per probe of every result.

use crate::model::Report;
use crate::sections;
use crate::{Presenter, Style};

/// `--format csv`: raw numbers in base units (bytes/s, IO/s, ns), no colour.
pub struct CsvPresenter;

impl Presenter for CsvPresenter {
    fn render(&self, report: &Report, _style: Style) -> String {
        match &report.comparison {
            Some(c) => sections::comparison_csv(c).to_csv(),
            None => sections::probes_csv(report).to_csv(),
        }
    }
}
